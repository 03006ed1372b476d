import { eq } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { OutboxJobSpec } from '../../src/core/ports.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { jobs } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { createOutboxWorker, type JobHandler } from '../../src/outbox/worker.js';
import { manualClock } from '../support/clock.js';
import { drivers, openTestDatabase } from '../support/database.js';

const LEASE_MS = 60_000;

/** A handler the test finishes by hand: resolve or reject each call it received. */
function heldHandler() {
  const calls: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  const handler: JobHandler<'proposal.escalate'> = () => new Promise<void>((resolve, reject) => calls.push({ resolve, reject }));
  return { handler, calls };
}

describe.each(drivers)('fenced job outcomes (%s)', (driver) => {
  let database: Database;
  const logger = pino({ level: 'silent' });
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

  // Each test queues a kind of its own (any kind of the catalogue, with a payload that fits it).
  async function enqueueOne(job: OutboxJobSpec, at: Date): Promise<number> {
    await createStore(database.db).transaction((tx) => tx.enqueue([job], at));
    const [row] = await database.db.select().from(jobs).where(eq(jobs.kind, job.kind));
    return row?.id ?? 0;
  }
  const rowOf = async (id: number) => (await database.db.select().from(jobs).where(eq(jobs.id, id)))[0];

  it('a worker whose lease ran out cannot complete, retry or bury the job another worker re-claimed', async () => {
    const clock = manualClock(new Date('2026-11-23T10:00:00Z'));
    const store = createJobStore(database.db);
    const first = heldHandler();
    const second = heldHandler();
    const options = { jobs: store, logger, clock, leaseMs: LEASE_MS, handlerDeadlineMs: LEASE_MS / 2, lanes: [{ name: 'all', concurrency: 1 }] };
    const workerA = createOutboxWorker({ ...options, workerId: 'A', handlers: { 'proposal.escalate': first.handler } });
    const workerB = createOutboxWorker({ ...options, workerId: 'B', handlers: { 'proposal.escalate': second.handler } });
    const id = await enqueueOne({ kind: 'proposal.escalate', payload: { proposalId: 'prp_fenced' } }, clock());

    const runA = workerA.runOnce();
    await vi.waitFor(() => expect(first.calls).toHaveLength(1));
    // A stalls (a long GC pause, a partition) past its lease; B takes the job over.
    clock.advance(LEASE_MS + 1);
    const runB = workerB.runOnce();
    await vi.waitFor(() => expect(second.calls).toHaveLength(1));
    expect(await rowOf(id)).toMatchObject({ status: 'running', attempts: 2, lockedBy: 'B:2' });

    // A finishes late: its "done" must not land while B still works on the job.
    first.calls[0]?.resolve();
    await runA;
    expect(await rowOf(id)).toMatchObject({ status: 'running', attempts: 2, lockedBy: 'B:2', lastError: null });

    // B's own outcome lands.
    second.calls[0]?.reject(new Error('receiver said 503'));
    await runB;
    expect(await rowOf(id)).toMatchObject({ status: 'queued', attempts: 2, lockedBy: null, lastError: 'receiver said 503' });
  }, 120_000);

  it('the store refuses reschedule and bury from a claim that is no longer current', async () => {
    const store = createJobStore(database.db);
    const start = new Date('2026-11-23T11:00:00Z');
    const id = await enqueueOne({ kind: 'proposal.remind', payload: { proposalId: 'prp_stale', index: 0 } }, start);
    const [stale] = await store.claimDue(start, 10, 1_000, { workerId: 'A', kinds: ['proposal.remind'] });
    const [current] = await store.claimDue(new Date(start.getTime() + 2_000), 10, 1_000, { workerId: 'B', kinds: ['proposal.remind'] });
    expect(stale?.id).toBe(id);
    expect(current?.lockedBy).toBe('B:2');

    expect(await store.reschedule(stale!, new Date(start.getTime() + 60_000), 'late failure', new Date())).toBe(false);
    expect(await store.bury(stale!, 'late death', new Date())).toBe(false);
    expect(await store.complete(stale!, new Date())).toBe(false);
    expect(await rowOf(id)).toMatchObject({ status: 'running', lockedBy: 'B:2', lastError: null });
    expect(await store.complete(current!, new Date())).toBe(true);
    expect(await rowOf(id)).toMatchObject({ status: 'done', lockedBy: null });
  }, 120_000);

  it('refuses a lease that is not longer than the handler deadline', () => {
    expect(() => createOutboxWorker({ jobs: createJobStore(database.db), logger, handlers: {}, leaseMs: 30_000, handlerDeadlineMs: 30_000 })).toThrow(/lease/);
    const worker = createOutboxWorker({ jobs: createJobStore(database.db), logger, handlers: {} });
    expect(worker).toBeDefined();
  });
});
