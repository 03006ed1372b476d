import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatPublisher, ProposalMessageView } from '../../src/chat/types.js';
import { createChatSync } from '../../src/chat/sync.js';
import { createChatMessageStore } from '../../src/db/chat-store.js';
import type { Database } from '../../src/db/database.js';
import { chatMessages, proposals } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { manualClock } from '../support/clock.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * A chat sync returns its last write unsent, for the outbox to send with the job's completion; any
 * write with a platform call after it goes at once. A message is recorded before a trail is posted
 * under it: should the trail fail, the retry must find the message and not post a second one.
 */
describe.each(drivers)("a chat sync's writes (%s)", (driver) => {
  let database: Database;
  const clock = manualClock(new Date('2026-11-29T09:30:00.000Z'));
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

  /** The platform side, kept in memory (the Slack and Discord publishers have tests of their own against fake servers). */
  function platform() {
    const calls: string[] = [];
    let trailFailures = 0;
    const publisher: ChatPublisher = {
      platform: 'slack',
      async post(channel: string, view: ProposalMessageView) {
        calls.push(`post ${view.status}`);
        return { channel, messageId: `${view.id}.${calls.length}` };
      },
      async update(_ref, view) {
        calls.push(`update ${view.status}`);
      },
      async postTrail(_ref, view) {
        calls.push(`trail of ${view.trail.length}`);
        if (trailFailures > 0) {
          trailFailures -= 1;
          throw new Error('Slack answered 500');
        }
      },
    };
    return { publisher, calls, failNextTrail: () => (trailFailures += 1) };
  }

  async function proposal(id: string, status: 'pending' | 'committed') {
    await createStore(database.db).transaction(async (tx) => {
      await tx.insertAgent(agentRecord(id, clock()));
      await tx.insertProposal(proposalRecord({ id, agentId: id, tokenHash: `token_${id}`, status }));
      await tx.appendAudit({ type: 'proposal.created', actor: 'agent', proposalId: id, agentId: id }, clock());
    });
  }
  const syncWith = (publisher: ChatPublisher) =>
    createChatSync({
      store: createStore(database.db),
      messages: createChatMessageStore(database.db),
      publishers: [publisher],
      channelFor: () => 'C1',
      describe: (operation) => operation,
      clock,
    });
  const messageOf = async (id: string) => (await database.db.select().from(chatMessages).where(eq(chatMessages.proposalId, id)))[0];

  it("leaves a post's record and an edit's version to its caller, unsent", async () => {
    await proposal('prp_sync_pending', 'pending');
    const { publisher, calls } = platform();
    const sync = syncWith(publisher);

    const posted = await sync.sync('prp_sync_pending', 'slack');
    expect(calls).toEqual(['post pending']);
    expect(await messageOf('prp_sync_pending')).toBeUndefined();
    await posted?.send();
    const recorded = await messageOf('prp_sync_pending');
    expect(recorded).toMatchObject({ messageId: 'prp_sync_pending.1', trailPosted: null });

    // Nothing new: nothing to write. A new state: an edit, and its version left to write.
    expect(await sync.sync('prp_sync_pending', 'slack')).toBeUndefined();
    await database.db.update(proposals).set({ status: 'approved' }).where(eq(proposals.id, 'prp_sync_pending'));
    const edited = await sync.sync('prp_sync_pending', 'slack');
    expect(calls).toEqual(['post pending', 'update approved']);
    expect((await messageOf('prp_sync_pending'))?.renderedVersion).toBe(recorded?.renderedVersion);
    await edited?.send();
    expect((await messageOf('prp_sync_pending'))?.renderedVersion).not.toBe(recorded?.renderedVersion);
  });

  it('records a message before posting the trail under it: a trail that fails is posted again, the message is not', async () => {
    await proposal('prp_sync_final', 'committed');
    const { publisher, calls, failNextTrail } = platform();
    const sync = syncWith(publisher);

    failNextTrail();
    await expect(sync.sync('prp_sync_final', 'slack')).rejects.toThrow('Slack answered 500');
    expect(await messageOf('prp_sync_final')).toMatchObject({ messageId: 'prp_sync_final.1', trailPosted: null });

    const trailPosted = await sync.sync('prp_sync_final', 'slack');
    expect(calls).toEqual(['post committed', 'trail of 1', 'trail of 1']);
    await trailPosted?.send();
    expect((await messageOf('prp_sync_final'))?.trailPosted).toEqual(clock());
    // Done: a later sync posts nothing more.
    expect(await sync.sync('prp_sync_final', 'slack')).toBeUndefined();
    expect(calls).toHaveLength(3);
  });
});
