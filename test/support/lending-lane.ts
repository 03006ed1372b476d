import { eq } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, expect, vi } from 'vitest';
import type { JobContext, JobHandler } from '../../src/core/jobs.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { jobs } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import type { JobRow, JobStore } from '../../src/outbox/ports.js';
import { createOutboxWorker, type OutboxLane } from '../../src/outbox/worker.js';
import { openTestDatabase, type Driver } from './database.js';

/** A lane that never polls in time: it claims only when woken, so every claim a test sees was caused. */
const NEVER_MS = 600_000;
const logger = pino({ level: 'silent' });

/** One run of the lane's chat.sync handler: the job, what it was handed, and its row as the run began. */
export interface LaneRun {
  jobId: number;
  known: JobContext['known'];
  attempt: number;
  lockedBy: string | null;
  row: JobRow | undefined;
}

/**
 * For a suite (call it inside its `describe`): a database of `driver` of its own, and `chat` lanes of
 * real outbox workers over a real job store, whose claims are counted, with a store whose
 * transactions may take jobs for them (`takeJob`): what tests of jobs claimed by the statement
 * that queues them drive. After each test its workers are stopped and the queue emptied.
 */
export function lendingLanes(driver: Driver) {
  let opened: Database | null = null;
  const database = (): Database => {
    if (!opened) throw new Error('the database opens before the suite runs (beforeAll)');
    return opened;
  };
  beforeAll(async () => {
    opened = await openTestDatabase(driver);
  }, 180_000);
  afterEach(() => stopAll());
  afterAll(() => opened?.close());
  let claims = 0;
  const claiming: Array<Promise<unknown>> = [];
  const workers: Array<ReturnType<typeof createOutboxWorker>> = [];
  let jobStore: JobStore | null = null;

  /** The real store, counting the claims the lanes make. */
  function countingStore(): JobStore {
    const stored = createJobStore(database().db);
    return {
      ...stored,
      claimDue(...args) {
        claims += 1;
        const claimed = stored.claimDue(...args);
        claiming.push(claimed.catch(() => undefined));
        return claimed;
      },
    };
  }

  /**
   * A worker with one chat lane of `concurrency` slots, started and past its first claim, and the
   * runs of its handler (`hold` keeps each run going until released; `handle` then does the job). With `wake: false` nothing
   * wakes the lane, so a queued job stays queued and what its insert wrote can be read.
   */
  async function setUp(concurrency: number, options: { hold?: boolean; wake?: boolean; handle?: JobHandler<'chat.sync'> } = {}) {
    jobStore ??= countingStore();
    const runs: LaneRun[] = [];
    const releases: Array<() => void> = [];
    const lane: OutboxLane = { name: 'chat', kinds: ['chat.sync'], concurrency };
    const worker = createOutboxWorker({
      jobs: jobStore,
      logger,
      lanes: [lane],
      pollIntervalMs: NEVER_MS,
      handlers: {
        'chat.sync': async (payload, context) => {
          const { jobId, known, attempt, claim } = context;
          const [row] = await database().db.select().from(jobs).where(eq(jobs.id, jobId));
          runs.push({ jobId, known, attempt, lockedBy: claim?.lockedBy ?? null, row });
          if (options.hold) await new Promise<void>((release) => releases.push(release));
          return options.handle?.(payload, context);
        },
      },
    });
    workers.push(worker);
    claims = 0;
    worker.start();
    // Its first claim, at start, found nothing: from here the lane claims only when woken.
    await vi.waitFor(() => expect(claims).toBe(1), { timeout: 10_000, interval: 5 });
    await settleClaims();
    claims = 0;
    const wake =
      options.wake === false ? {} : { onJobsQueued: (kinds: readonly string[], inMs?: number, key?: string | null) => worker.wake(kinds, inMs, key ?? null) };
    const store = createStore(database().db, { takeJob: worker.takeJob, ...wake });
    return { worker, store, runs, releaseAll: () => releases.splice(0).forEach((release) => release()) };
  }

  /** Waits for the claims sent so far to answer. */
  async function settleClaims(): Promise<void> {
    await Promise.all(claiming.splice(0));
  }

  /** The jobs of a proposal's Slack message, oldest first. */
  async function rowsOf(proposalId: string) {
    const rows = await database()
      .db.select()
      .from(jobs)
      .where(eq(jobs.orderingKey, `chat:slack:${proposalId}`))
      .orderBy(jobs.id);
    return rows.map((row) => ({ ...row }));
  }

  /** Rewrites a job's row as a test needs it (behind an older job of its key, in a backoff, done). */
  async function changeJob(id: number | undefined, patch: Partial<typeof jobs.$inferInsert>): Promise<void> {
    if (id === undefined) throw new Error('no such job');
    await database().db.update(jobs).set(patch).where(eq(jobs.id, id));
  }

  /**
   * Stops the workers, then empties the queue: a job a test left due (one waiting out a backoff)
   * would be claimed by the next test's worker as it starts, and counted and run there.
   */
  async function stopAll(): Promise<void> {
    await Promise.all(workers.splice(0).map((worker) => worker.stop()));
    await database().db.delete(jobs);
  }

  return {
    setUp,
    settleClaims,
    rowsOf,
    changeJob,
    /** Claims the lanes made since the last `setUp` or `resetClaims`. */
    claims: () => claims,
    resetClaims: () => {
      claims = 0;
    },
    database,
  };
}
