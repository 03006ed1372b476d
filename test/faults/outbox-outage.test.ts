import { eq } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { DatabaseConnectionError } from '../../src/lib/driver-errors.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import type { JobStore } from '../../src/outbox/ports.js';
import { jobs } from '../../src/db/schema.js';
import type { OutboxJobSpec } from '../../src/core/ports.js';
import { createStore } from '../../src/db/store.js';
import { createOutboxWorker, type JobOutcome } from '../../src/outbox/worker.js';
import { drivers, openTestDatabase } from '../support/database.js';

/** What a write gets while PostgreSQL restarts: the connection is refused. */
const refused = () => new DatabaseConnectionError('no connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));

/**
 * A job whose work was done just as the database went away: its outcome is recorded once the
 * database is back. Before, the failed write left the job claimed until its lease (60 s) ran out,
 * and then it ran a second time: a second chat edit, a second callback.
 */
describe.each(drivers)('an outbox job finished while the database is away (%s)', (driver) => {
  let database: Database;
  const logger = pino({ level: 'silent' });
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

  /** The real job store, whose outcome writes fail `times` times as if the database were down. */
  function downFor(times: number, store: JobStore): JobStore & { failed: () => number } {
    let failed = 0;
    const failing =
      <A extends unknown[], R>(write: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        if (failed < times) {
          failed += 1;
          throw refused();
        }
        return write(...args);
      };
    return { ...store, completeAll: failing(store.completeAll.bind(store)), reschedule: failing(store.reschedule.bind(store)), failed: () => failed };
  }

  for (const [handlerOutcome, expected] of [
    ['succeeds', { status: 'done', outcome: 'done' }],
    ['fails', { status: 'queued', outcome: 'retry' }],
  ] as const) {
    it(`when its handler ${handlerOutcome}, the outcome is recorded once the database answers, and the handler ran once`, async () => {
      // A kind of its own for each case (they share the database).
      const job: OutboxJobSpec =
        handlerOutcome === 'succeeds'
          ? { kind: 'proposal.remind', payload: { proposalId: 'prp_outage', index: 0 } }
          : { kind: 'proposal.escalate', payload: { proposalId: 'prp_outage' } };
      const { kind } = job;
      await createStore(database.db).transaction((tx) => tx.enqueue([job], new Date()));
      const store = downFor(3, createJobStore(database.db));
      let runs = 0;
      const handler = async () => {
        runs += 1;
        if (handlerOutcome === 'fails') throw new Error('receiver said 503');
      };
      const outcomes: JobOutcome[] = [];
      const worker = createOutboxWorker({
        jobs: store,
        logger,
        lanes: [{ name: 'all', concurrency: 1 }],
        handlers: { 'proposal.remind': handler, 'proposal.escalate': handler },
        onSettled: (_job, outcome) => outcomes.push(outcome),
      });
      expect(await worker.runOnce()).toBe(1);
      const [row] = await database.db.select().from(jobs).where(eq(jobs.kind, kind));
      expect({ status: row?.status, outcome: outcomes[0] }).toEqual(expected);
      expect([runs, store.failed()]).toEqual([1, 3]);
    });
  }
});
