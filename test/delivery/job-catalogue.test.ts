import { eq } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import type { JobHandlers, JobPayloads } from '../../src/core/jobs.js';
import type { OutboxJobSpec, StoreTransaction } from '../../src/core/ports.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { jobs } from '../../src/db/schema.js';
import { createOutboxWorker } from '../../src/outbox/worker.js';
import { drivers, openTestDatabase } from '../support/database.js';

/**
 * The job catalogue (src/core/jobs.ts): a job's kind fixes its payload's type where it is queued
 * and where it is handled (checked by `npm run typecheck`, which covers test/), and the outbox
 * parses every stored payload with its kind's schema before its handler sees it.
 */

describe('job kinds and payloads, at compile time', () => {
  it('an enqueue with another kind’s payload, or a handler of the wrong payload, does not compile', () => {
    // Never called: what matters is that each marked line is a type error (an unused
    // `@ts-expect-error` fails the typecheck).
    const compileOnly = (tx: StoreTransaction, at: Date) => {
      void tx.enqueue([{ kind: 'chat.sync', payload: { proposalId: 'prp_1', platform: 'slack' } }], at);
      // @ts-expect-error -- a platform that is not a name of the catalogue
      void tx.enqueue([{ kind: 'chat.sync', payload: { proposalId: 'prp_1', platform: 'irc' } }], at);
      // @ts-expect-error -- the payload of `proposal.escalate` under the kind `callback.deliver`
      void tx.enqueue([{ kind: 'callback.deliver', payload: { proposalId: 'prp_1' } }], at);
      // @ts-expect-error -- a kind the catalogue does not name
      void tx.enqueue([{ kind: 'chat.delete', payload: { proposalId: 'prp_1' } }], at);
      const handlers: Partial<JobHandlers> = {
        // @ts-expect-error -- a reminder's index is a number
        'proposal.remind': async (payload: { proposalId: string; index: string }) => void payload,
      };
      return handlers;
    };
    expect(compileOnly).toBeTypeOf('function');
    expectTypeOf<JobPayloads['chat.sync']['platform']>().toEqualTypeOf<'slack' | 'discord' | 'teams' | 'email'>();
    expectTypeOf<JobPayloads['proposal.remind']>().toEqualTypeOf<{ proposalId: string; index: number }>();
    expectTypeOf<Extract<OutboxJobSpec, { kind: 'chat.followup' }>['payload']['kind']>().toEqualTypeOf<'remind' | 'escalate'>();
  });
});

describe.each(drivers)('stored payloads the catalogue refuses (%s)', (driver) => {
  let database: Database;
  const logger = pino({ level: 'silent' });
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

  it('a stored job whose payload does not fit its kind is buried with the reason, never run; the others run', async () => {
    const store = createJobStore(database.db);
    const now = new Date();
    const runs: Array<[string, unknown]> = [];
    const record =
      (kind: string) =>
      async (payload: unknown): Promise<void> =>
        void runs.push([kind, payload]);
    const stored = [
      { kind: 'chat.sync', payload: { proposalId: 'prp_1', platform: 'irc' } },
      { kind: 'proposal.remind', payload: { proposalId: 42, index: 0 } },
      { kind: 'callback.deliver', payload: { proposalId: 'prp_2', status: 'expired' } },
      { kind: 'proposal.archive', payload: { proposalId: 'prp_3' } },
      // As an earlier version wrote them: a reminder without its index, a callback without its agent.
      { kind: 'proposal.remind', payload: { proposalId: 'prp_4' } },
      { kind: 'callback.deliver', payload: { proposalId: 'prp_5', status: 'committed', destination: 'hooks.example' } },
    ];
    const ids = await store.insertMany(
      stored.map((job) => ({ ...job, maxAttempts: 25 })),
      now,
    );
    const worker = createOutboxWorker({
      jobs: store,
      logger,
      lanes: [{ name: 'all', concurrency: 10 }],
      handlers: { 'chat.sync': record('chat.sync'), 'proposal.remind': record('proposal.remind'), 'callback.deliver': record('callback.deliver') },
    });
    expect(await worker.runOnce()).toBe(stored.length);

    const rows = await Promise.all(ids.map(async (id) => (await database.db.select().from(jobs).where(eq(jobs.id, id)))[0]));
    expect(rows.map((row) => [row?.status, row?.attempts])).toEqual([
      ['dead', 1],
      ['dead', 1],
      ['dead', 1],
      ['dead', 1],
      ['done', 1],
      ['done', 1],
    ]);
    expect(rows[0]?.lastError).toMatch(/^the stored payload of a chat\.sync job does not fit its schema \(platform: /);
    expect(rows[1]?.lastError).toMatch(/proposal\.remind job .*proposalId: /);
    expect(rows[2]?.lastError).toMatch(/callback\.deliver job .*destination: /);
    expect(rows[3]?.lastError).toBe('no handler for job kind "proposal.archive"');
    // Only the jobs that fit ran, and with their payloads parsed (the reminder's index defaults to 0).
    expect(runs).toEqual(
      expect.arrayContaining([
        ['proposal.remind', { proposalId: 'prp_4', index: 0 }],
        ['callback.deliver', { proposalId: 'prp_5', status: 'committed', destination: 'hooks.example' }],
      ]),
    );
    expect(runs).toHaveLength(2);
  }, 120_000);
});
