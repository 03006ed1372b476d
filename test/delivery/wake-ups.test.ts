import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { DeliveryError } from '../../src/lib/delivery-error.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import type { JobStore } from '../../src/outbox/ports.js';
import { createOutboxWorker, type JobHandler, type OutboxLane } from '../../src/outbox/worker.js';
import { drivers, openTestDatabase } from '../support/database.js';

/**
 * The outbox's poll is only a fallback: a job its worker knows is due now is claimed without it. Each
 * worker here polls once in ten minutes, so a job that waited for the poll would never run in time.
 */

const NEVER_MS = 600_000;
const lane: OutboxLane = { name: 'chat', kinds: ['chat.sync'], concurrency: 4 };
const logger = pino({ level: 'silent' });

describe.each(drivers)('outbox wake-ups without the poll (%s)', (driver) => {
  let database: Database;
  let store: JobStore;
  const workers: Array<ReturnType<typeof createOutboxWorker>> = [];
  beforeAll(async () => {
    database = await openTestDatabase(driver);
    store = createJobStore(database.db);
  }, 180_000);
  // Each test's workers stop with it: a worker left running would claim the next test's jobs
  // whenever it next claims, and its handler would finish them unseen.
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.stop()));
  });
  afterAll(() => database.close());

  /** A worker of the one lane that never polls in time, running `handle` for its chat.sync jobs. */
  function startWorker(handle: JobHandler<'chat.sync'>, backoff?: { baseMs: number; maxMs: number }) {
    const worker = createOutboxWorker({
      jobs: store,
      logger,
      lanes: [lane],
      pollIntervalMs: NEVER_MS,
      ...(backoff ? { backoff } : {}),
      handlers: { 'chat.sync': handle },
    });
    workers.push(worker);
    worker.start();
    return worker;
  }

  it('a job queued behind another of its ordering key runs as soon as that one is done', async () => {
    const proposalId = `prp_wake_${driver}_key`;
    const key = `chat:slack:${proposalId}`;
    const job = { kind: 'chat.sync', payload: { proposalId, platform: 'slack' }, orderingKey: key, maxAttempts: 5 };
    const [firstId = 0, secondId = 0] = await store.insertMany([job, job], new Date());
    const ran: number[] = [];
    let finishFirst = () => {};
    const firstStarted = new Promise<void>((started) => {
      const worker = createOutboxWorker({
        jobs: store,
        logger,
        lanes: [lane],
        pollIntervalMs: NEVER_MS,
        handlers: {
          'chat.sync': (_payload, { jobId }) => {
            ran.push(jobId);
            if (jobId !== firstId) return Promise.resolve();
            started();
            return new Promise<void>((resolve) => (finishFirst = resolve));
          },
        },
      });
      workers.push(worker);
      worker.start();
    });
    await firstStarted;
    // While the first runs, the second is held back by its key; the first's completion lets it go.
    expect(ran).toEqual([firstId]);
    finishFirst();
    await vi.waitFor(() => expect(ran).toEqual([firstId, secondId]), { timeout: 10_000, interval: 10 });
  });

  it('a job put back for a retry runs again when it falls due', async () => {
    const proposalId = `prp_wake_${driver}_retry`;
    const [id = 0] = await store.insertMany([{ kind: 'chat.sync', payload: { proposalId, platform: 'slack' }, maxAttempts: 5 }], new Date());
    const attempts: number[] = [];
    startWorker(
      (_payload, { attempt, jobId }) => {
        if (jobId !== id) return Promise.resolve();
        attempts.push(attempt);
        return attempt === 1 ? Promise.reject(new Error('Slack is away for a moment')) : Promise.resolve();
      },
      { baseMs: 50, maxMs: 50 },
    );
    await vi.waitFor(() => expect(attempts).toEqual([1, 2]), { timeout: 10_000, interval: 10 });
  });

  it('jobs put back for retries that fall due at different times each run when theirs comes', async () => {
    const proposalId = `prp_wake_${driver}_two_retries`;
    const job = (platform: string) => ({ kind: 'chat.sync', payload: { proposalId, platform }, maxAttempts: 5 });
    const [soonId = 0, laterId = 0] = await store.insertMany([job('slack'), job('discord')], new Date());
    // The later retry is asked for while the sooner one's wake-up is pending; the sooner one's
    // claim must not take the later one's wake-up with it.
    const retryAfterMs = new Map([
      [soonId, 50],
      [laterId, 300],
    ]);
    const runs: Array<[number, number]> = [];
    startWorker(
      (_payload, { attempt, jobId }) => {
        if (!retryAfterMs.has(jobId)) return Promise.resolve();
        runs.push([jobId, attempt]);
        return attempt === 1 ? Promise.reject(new DeliveryError('busy', { retryAfterMs: retryAfterMs.get(jobId) })) : Promise.resolve();
      },
      { baseMs: 1, maxMs: 1 },
    );
    await vi.waitFor(() => expect(runs.filter(([, attempt]) => attempt === 2).map(([id]) => id)).toEqual([soonId, laterId]), {
      timeout: 10_000,
      interval: 10,
    });
  });

  it('a job queued to run shortly runs when it falls due, woken by the process that queued it', async () => {
    const proposalId = `prp_wake_${driver}_later`;
    const dueAt = Date.now() + 150;
    const [id = 0] = await store.insertMany([{ kind: 'chat.sync', payload: { proposalId, platform: 'slack' }, maxAttempts: 5 }], new Date(dueAt));
    const ranAt: number[] = [];
    const worker = startWorker((_payload, { jobId }) => {
      if (jobId === id) ranAt.push(Date.now());
      return Promise.resolve();
    });
    worker.wake(['chat.sync'], 150);
    await vi.waitFor(() => expect(ranAt).toHaveLength(1), { timeout: 10_000, interval: 10 });
    expect(ranAt[0]).toBeGreaterThanOrEqual(dueAt - 20);
  });
});
