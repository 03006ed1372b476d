import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRAIL_EVENT_LIMIT } from '../../src/chat/ports.js';
import { createChatMessageStore } from '../../src/db/chat-store.js';
import type { Database } from '../../src/db/database.js';
import { proposals } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * A chat sync reads everything it renders in one statement, the audit trail included when the
 * message is due one: a final proposal whose message has no trail yet. The trail is the proposal's
 * audit events, oldest first, as many as a message shows.
 */
describe.each(drivers)('the chat sync read (%s)', (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

  const at = new Date('2026-11-29T08:00:00.000Z');
  const later = (seconds: number) => new Date(at.getTime() + seconds * 1_000);

  async function proposalWithEvents(id: string, events: number) {
    const store = createStore(database.db);
    await store.transaction(async (tx) => {
      await tx.insertAgent(agentRecord(id, at));
      await tx.insertProposal(proposalRecord({ id, agentId: id, tokenHash: `token_${id}` }));
      for (let n = 0; n < events; n += 1) {
        await tx.appendAudit({ type: `step.${n}`, actor: n % 2 ? 'slack:U1' : 'agent', proposalId: id, agentId: id, data: { n } }, later(n));
      }
    });
  }
  const finish = (id: string) => database.db.update(proposals).set({ status: 'committed' }).where(eq(proposals.id, id));

  it('has no trail while the proposal waits; once it is final, its events until a trail is recorded as posted', async () => {
    const messages = createChatMessageStore(database.db);
    await proposalWithEvents('prp_trail', 3);
    expect((await messages.getForSync('prp_trail', 'slack'))?.trail).toBeNull();

    await finish('prp_trail');
    // Final and not posted yet, before its message exists (a proposal decided before its first post)…
    const beforePost = await messages.getForSync('prp_trail', 'slack');
    expect(beforePost?.message).toBeNull();
    expect(beforePost?.trail).toEqual([0, 1, 2].map((n) => ({ at: later(n), type: `step.${n}`, actor: n % 2 ? 'slack:U1' : 'agent', data: { n } })));
    // …and after.
    await messages.posted({ proposalId: 'prp_trail', platform: 'slack', channel: 'C1', messageId: '1.0', renderedVersion: 'v1', createdAt: at }).send();
    expect((await messages.getForSync('prp_trail', 'slack'))?.trail).toHaveLength(3);

    await messages.trailPosted('prp_trail', 'slack', later(10)).send();
    expect((await messages.getForSync('prp_trail', 'slack'))?.trail).toBeNull();
    // Each platform's message has a trail of its own.
    expect((await messages.getForSync('prp_trail', 'discord'))?.trail).toHaveLength(3);
  });

  it('carries the oldest events, as many as a message shows', async () => {
    const messages = createChatMessageStore(database.db);
    await proposalWithEvents('prp_long_trail', TRAIL_EVENT_LIMIT + 5);
    await finish('prp_long_trail');
    const trail = (await messages.getForSync('prp_long_trail', 'slack'))?.trail ?? [];
    expect(trail).toHaveLength(TRAIL_EVENT_LIMIT);
    expect(trail.map((event) => event.type)).toEqual(Array.from({ length: TRAIL_EVENT_LIMIT }, (_, n) => `step.${n}`));
  });
});
