import { eq } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import type { JobStore } from '../../src/outbox/ports.js';
import { jobs } from '../../src/db/schema.js';
import { createOutboxWorker, type JobOutcome, type OutboxLane } from '../../src/outbox/worker.js';
import { manualClock } from '../support/clock.js';
import { drivers, openTestDatabase } from '../support/database.js';

/**
 * A lane with a short lease (stored clicks) renews it while a job runs: a live worker keeps a job
 * however long it runs, a dead one's job is claimable again within the short lease.
 */

const SHORT_LEASE_MS = 300;
const lane: OutboxLane = { name: 'clicks', kinds: ['slack.click'], concurrency: 1, renewedLeaseMs: SHORT_LEASE_MS, handlerDeadlineMs: 60_000 };

describe.each(drivers)('renewed leases (%s)', (driver) => {
  let database: Database;
  let store: JobStore;
  const logger = pino({ level: 'silent' });
  beforeAll(async () => {
    database = await openTestDatabase(driver);
    store = createJobStore(database.db);
  }, 180_000);
  afterAll(() => database.close());

  const rowOf = async (id: number) => (await database.db.select().from(jobs).where(eq(jobs.id, id)))[0];

  it("a live worker's long run keeps its job past the lease; once its renewals stop, another worker runs it again", async () => {
    const clock = manualClock();
    const t0 = clock().getTime();
    const click = { action: 'approve', proposalId: 'prp_renewed', userId: 'U0CLICKER', receivedAt: clock().toISOString(), channel: null };
    const [id = 0] = await store.insertMany([{ kind: 'slack.click', payload: click, maxAttempts: 5 }], clock());
    let renewing = true;
    // The first worker's renewals reach the database until its process "hangs" (a dead process renews nothing).
    const renewable: JobStore = { ...store, renew: (claimed, until) => (renewing ? store.renew(claimed, until) : Promise.resolve(new Set<number>())) };
    let finishFirst = () => {};
    let started = () => {};
    const firstStarted = new Promise<void>((resolve) => (started = resolve));
    const outcomes: JobOutcome[] = [];
    const first = createOutboxWorker({
      jobs: renewable,
      logger,
      clock,
      lanes: [lane],
      pollIntervalMs: 20,
      handlers: {
        'slack.click': () =>
          new Promise<void>((resolve) => {
            finishFirst = resolve;
            started();
          }),
      },
      onSettled: (_job, outcome) => outcomes.push(outcome),
    });
    const secondRuns: number[] = [];
    const secondAt = { offsetMs: 0 };
    const second = createOutboxWorker({
      jobs: store,
      logger,
      clock: () => new Date(clock().getTime() + secondAt.offsetMs),
      lanes: [lane],
      handlers: { 'slack.click': async (_payload, { attempt }) => void secondRuns.push(attempt) },
    });
    first.start();
    try {
      await firstStarted;
      expect((await rowOf(id))?.lockedUntil?.getTime()).toBe(t0 + SHORT_LEASE_MS);

      // Time passes well beyond the first lease; the live worker renews it.
      clock.advance(1_000);
      await vi.waitFor(async () => expect((await rowOf(id))?.lockedUntil?.getTime()).toBe(t0 + 1_000 + SHORT_LEASE_MS), { timeout: 5_000, interval: 10 });
      secondAt.offsetMs = SHORT_LEASE_MS - 100;
      expect(await second.runOnce()).toBe(0);

      // Its renewals stop: once the last lease has run out, the other worker takes the job and runs it again.
      renewing = false;
      secondAt.offsetMs = SHORT_LEASE_MS + 1;
      expect(await second.runOnce()).toBe(1);
      expect(secondRuns).toEqual([2]);
      expect(await rowOf(id)).toMatchObject({ status: 'done', attempts: 2 });
    } finally {
      // The first run ends late: its outcome is fenced off by the second claim.
      finishFirst();
      await first.stop();
    }
    expect(outcomes).toEqual(['superseded']);
  });

  it('the process that alone holds the embedded database ends every claim it finds at start', async () => {
    const clock = manualClock();
    const [id = 0] = await store.insertMany([{ kind: 'chat.sync', payload: { n: 2 }, maxAttempts: 5 }], clock());
    const [claimed] = await store.claimDue(clock(), 1, 60_000, { kinds: ['chat.sync'] });
    expect(claimed?.id).toBe(id);
    expect(await store.claimDue(clock(), 1, 60_000, { kinds: ['chat.sync'] })).toEqual([]);
    expect(await store.releaseAllClaims(clock())).toBeGreaterThanOrEqual(1);
    clock.advance(1);
    expect((await store.claimDue(clock(), 1, 60_000, { kinds: ['chat.sync'] })).map((job) => job.id)).toEqual([id]);
  });
});
