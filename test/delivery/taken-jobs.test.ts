import { describe, expect, it, vi } from 'vitest';
import type { ProposalSnapshot } from '../../src/core/jobs.js';
import type { OutboxJobOptions, OutboxJobSpec } from '../../src/core/ports.js';
import { drivers } from '../support/database.js';
import { lendingLanes } from '../support/lending-lane.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * A job first of its ordering key (a new proposal's first post) is taken by this process's outbox as
 * its transaction inserts it: written `running` under this worker's claim, run once the transaction
 * committed with what the transaction knew, without a claim statement or a read. Without a free
 * slot, or when the transaction fails, nothing of that happens: the job is queued as any other, or
 * not at all, and the slot is free again.
 */

// Now: the lanes claim by the real clock.
const at = new Date();

describe.each(drivers)('jobs taken as they are queued (%s)', (driver) => {
  const lanes = lendingLanes(driver);
  const { setUp, rowsOf } = lanes;

  const snapshotOf = (id: string): ProposalSnapshot => ({
    proposal: proposalRecord({ id, agentId: 'agt_taken' }),
    agent: agentRecord('agt_taken', at),
    approvals: [],
  });
  const firstPost = (id: string, extra: OutboxJobOptions = {}): OutboxJobSpec => ({
    kind: 'chat.sync',
    payload: { proposalId: id, platform: 'slack' },
    orderingKey: `chat:slack:${id}`,
    coalesce: true,
    firstOfItsKey: { known: snapshotOf(id) },
    ...extra,
  });

  it.each([
    ['alone (its one statement commits by itself)', false],
    ['in a transaction that began', true],
  ])('a first post queued %s is inserted running under this worker, runs with what was known, and no lane claims', async (_label, begins) => {
    const { worker, store, runs } = await setUp(2);
    const id = `prp_taken_${driver}_${begins ? 'begun' : 'alone'}`;
    await store.transaction(async (tx) => {
      if (begins) await tx.begin();
      await tx.enqueue([firstPost(id)], at);
    });
    await vi.waitFor(async () => expect((await rowsOf(id))[0]?.status).toBe('done'), { timeout: 10_000, interval: 20 });
    expect(runs).toHaveLength(1);
    const [run] = runs;
    // As a claim would have left it: running, attempt 1, under this worker's stamp, leased.
    expect(run?.row).toMatchObject({ status: 'running', attempts: 1, lockedBy: `${worker.workerId}:1` });
    expect(run?.row?.lockedUntil?.getTime()).toBe(at.getTime() + 60_000);
    expect(run).toMatchObject({ attempt: 1, lockedBy: `${worker.workerId}:1`, known: snapshotOf(id) });
    expect(lanes.claims()).toBe(0);
  });

  it('with no slot free the job is queued, then claimed as any other, and is not handed what was known', async () => {
    const { store, runs, releaseAll } = await setUp(1, { hold: true });
    const busy = `prp_taken_${driver}_busy`;
    const waiting = `prp_taken_${driver}_waiting`;
    await store.transaction(async (tx) => tx.enqueue([firstPost(busy)], at));
    await vi.waitFor(() => expect(runs).toHaveLength(1), { timeout: 10_000, interval: 20 });
    lanes.resetClaims();
    await store.transaction(async (tx) => tx.enqueue([firstPost(waiting)], at));
    expect((await rowsOf(waiting))[0]).toMatchObject({ status: 'queued', attempts: 0, lockedBy: null });
    releaseAll();
    await vi.waitFor(() => expect(runs).toHaveLength(2), { timeout: 10_000, interval: 20 });
    releaseAll();
    expect(runs[1]).toMatchObject({ attempt: 1, known: undefined });
    expect(lanes.claims()).toBeGreaterThan(0);
    await vi.waitFor(async () => expect((await rowsOf(waiting))[0]?.status).toBe('done'), { timeout: 10_000, interval: 20 });
  });

  it("a change queued while a taken post runs waits for it: the edit finds the post's message, it does not race it", async () => {
    const { store, runs, releaseAll } = await setUp(4, { hold: true });
    const id = `prp_taken_${driver}_ordered`;
    await store.transaction(async (tx) => tx.enqueue([firstPost(id)], at));
    await vi.waitFor(() => expect(runs).toHaveLength(1), { timeout: 10_000, interval: 20 });
    // The proposal changes while its post is still on its way: its edit is queued behind the post.
    await store.transaction(async (tx) =>
      tx.enqueue([{ kind: 'chat.sync', payload: { proposalId: id, platform: 'slack' }, orderingKey: `chat:slack:${id}`, coalesce: true }], at),
    );
    const [post, edit] = await rowsOf(id);
    expect(edit).toMatchObject({ status: 'queued' });
    // Woken, the lane has free slots, yet the edit stays queued while the post of its key runs.
    await vi.waitFor(() => expect(lanes.claims()).toBeGreaterThan(0), { timeout: 10_000, interval: 5 });
    await lanes.settleClaims();
    // The claim has answered: had it taken the edit, its row would say so already.
    expect((await rowsOf(id))[1]).toMatchObject({ id: edit?.id, status: 'queued' });
    expect(runs.map((run) => run.jobId)).toEqual([post?.id]);
    releaseAll();
    await vi.waitFor(() => expect(runs.map((run) => run.jobId)).toEqual([post?.id, edit?.id]), { timeout: 10_000, interval: 20 });
    releaseAll();
    expect(runs[1]).toMatchObject({ known: undefined });
  });

  it('a transaction that fails inserts nothing, runs nothing, and gives its slot back', async () => {
    const { store, runs } = await setUp(1);
    const failed = `prp_taken_${driver}_failed`;
    await expect(
      store.transaction(async (tx) => {
        await tx.begin();
        await tx.enqueue([firstPost(failed)], at);
        // A statement the database refuses, after the job was queued: the transaction rolls back.
        await tx.insertAgent(agentRecord('agt_taken_twice', at));
        await tx.insertAgent(agentRecord('agt_taken_twice', at));
      }),
    ).rejects.toThrow();
    expect(await rowsOf(failed)).toEqual([]);
    // The lane's one slot is free again: the next first post is taken, not queued.
    const next = `prp_taken_${driver}_after_failure`;
    await store.transaction(async (tx) => tx.enqueue([firstPost(next)], at));
    await vi.waitFor(() => expect(runs.map((run) => run.row?.orderingKey)).toEqual([`chat:slack:${next}`]), { timeout: 10_000, interval: 20 });
    expect(runs[0]?.row).toMatchObject({ status: 'running', attempts: 1 });
    expect(lanes.claims()).toBe(0);
  });

  it('a job due later, or not first of its key, is queued as before', async () => {
    const { store } = await setUp(4, { wake: false });
    const later = `prp_taken_${driver}_later`;
    const plain = `prp_taken_${driver}_plain`;
    await store.transaction(async (tx) => {
      await tx.enqueue([firstPost(later, { runAt: new Date(at.getTime() + 60_000) })], at);
      await tx.enqueue([{ kind: 'chat.sync', payload: { proposalId: plain, platform: 'slack' }, orderingKey: `chat:slack:${plain}`, coalesce: true }], at);
    });
    expect((await rowsOf(later))[0]).toMatchObject({ status: 'queued', attempts: 0, lockedBy: null });
    expect((await rowsOf(plain))[0]).toMatchObject({ status: 'queued', attempts: 0, lockedBy: null });
  });

  it('a stopped worker takes nothing', async () => {
    const { worker, store } = await setUp(4);
    await worker.stop();
    const id = `prp_taken_${driver}_stopped`;
    await store.transaction(async (tx) => tx.enqueue([firstPost(id)], at));
    expect((await rowsOf(id))[0]).toMatchObject({ status: 'queued', attempts: 0, lockedBy: null });
  });
});
