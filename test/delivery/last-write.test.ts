import { eq } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRecordedDatabase, SqlRecorder } from '../../bench/support/sql-trace.js';
import { createChatMessageStore } from '../../src/db/chat-store.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { chatMessages, jobs } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { createOutboxWorker } from '../../src/outbox/worker.js';
import { manualClock } from '../support/clock.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * A handler's last write (src/core/jobs.ts, `LastWrite`) goes in one statement with its job's
 * completion: a chat post or edit costs the claim and that statement, not a write and then a
 * completion. One statement is atomic: a write the database refuses leaves the completion unwritten
 * too, and the job is retried as if its handler had failed.
 */
describe.each(drivers)("a job's last write (%s)", (driver) => {
  const recorder = new SqlRecorder();
  let scratch: (Database & { url?: string }) | null = null;
  let database: Database;
  const clock = manualClock(new Date('2026-11-29T09:00:00.000Z'));
  const logger = pino({ level: 'silent' });

  beforeAll(async () => {
    scratch = driver === 'postgres' ? await openTestDatabase('postgres', { poolSize: 1 }) : null;
    database = await openRecordedDatabase(scratch?.url, recorder);
    await createStore(database.db).transaction(async (tx) => {
      const at = clock();
      await tx.insertAgent(agentRecord('agt_lw', at));
      await tx.insertProposal(proposalRecord({ id: 'prp_lw', agentId: 'agt_lw', tokenHash: 'token_lw' }));
    });
  }, 180_000);
  afterAll(async () => {
    await database?.close();
    await scratch?.close();
  });

  /** A worker whose chat.sync handler records a post of `proposalId`'s message as its last write. */
  function workerPosting(proposalId: string) {
    const messages = createChatMessageStore(database.db);
    return createOutboxWorker({
      jobs: createJobStore(database.db),
      logger,
      clock,
      workerId: 'W',
      lanes: [{ name: 'chat', kinds: ['chat.sync'], concurrency: 1 }],
      handlers: {
        'chat.sync': async () =>
          messages.posted({ proposalId, platform: 'slack', channel: 'C1', messageId: `${proposalId}.1`, renderedVersion: 'v1', createdAt: clock() }),
      },
    });
  }
  const queueSync = (proposalId: string) =>
    createStore(database.db).transaction((tx) => tx.enqueue([{ kind: 'chat.sync', payload: { proposalId, platform: 'slack' } }], clock()));
  const jobOf = async (proposalId: string) => (await database.db.select().from(jobs)).find((job) => job.payload.proposalId === proposalId);
  const messageOf = (proposalId: string) => database.db.select().from(chatMessages).where(eq(chatMessages.proposalId, proposalId));

  it('lands with the completion, in the statement after the claim', async () => {
    await queueSync('prp_lw');
    const { value: ran, statements } = await recorder.during(() => workerPosting('prp_lw').runOnce());
    expect(ran).toBe(1);
    expect(statements.map((statement) => statement.text.replace(/\s+/g, ' ').trim().slice(0, 40))).toEqual([
      "update jobs set status = 'running', atte",
      'with "last_write" as (insert into "chat_',
    ]);
    expect(await jobOf('prp_lw')).toMatchObject({ status: 'done', lockedBy: null, attempts: 1 });
    expect(await messageOf('prp_lw')).toMatchObject([{ messageId: 'prp_lw.1', renderedVersion: 'v1' }]);
  });

  it('refused by the database, it fails the run: neither it nor the completion lands, and the job is retried with the reason', async () => {
    // No such proposal: the message's row breaks its foreign key.
    await queueSync('prp_missing');
    expect(await workerPosting('prp_missing').runOnce()).toBe(1);
    const job = await jobOf('prp_missing');
    expect(job).toMatchObject({ status: 'queued', lockedBy: null, attempts: 1 });
    expect(job?.lastError).toMatch(/foreign key/);
    expect(job!.runAt.getTime()).toBeGreaterThan(clock().getTime());
    expect(await messageOf('prp_missing')).toEqual([]);
  });

  it('from a worker whose claim was taken over, the write lands and the completion does not', async () => {
    const messages = createChatMessageStore(database.db);
    const write = messages.rendered('prp_lw', 'slack', 'v2');
    const [held] = await database.db.select().from(jobs).where(eq(jobs.status, 'done'));
    expect(await write.completing({ id: held!.id, lockedBy: 'W:1' }, clock())).toEqual({ held: false, followed: false });
    expect(await messageOf('prp_lw')).toMatchObject([{ renderedVersion: 'v2' }]);
  });
});
