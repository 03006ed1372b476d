import { describe, expect, it, vi } from 'vitest';
import type { OutboxJobOptions, OutboxJobSpec } from '../../src/core/ports.js';
import { NoLongerExecutingError, type Store } from '../../src/core/ports.js';
import { drivers } from '../support/database.js';
import { lendingLanes } from '../support/lending-lane.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * A result's chat edit runs at once, in the slot its statement took. While an execution runs, its
 * proposal's edit waits (due a little later, in case the result comes first); the statement that
 * records the result would only join that waiting edit (it coalesces). Instead, with a slot of this
 * process's chat lane free, it claims the waiting edit for it when that edit is next of its message
 * and has never run: the edit runs once the result committed, with no claim statement, and the
 * lane's timed wake-up for it is dropped. Otherwise everything is as before.
 */

// Now: the lanes claim by the real clock.
const at = new Date();
/** How long the waiting edit is held back (as the core holds an executing proposal's edit). */
const HELD_MS = 150;

describe.each(drivers)('a waiting edit taken by its result (%s)', (driver) => {
  const lanes = lendingLanes(driver);
  const { setUp, rowsOf } = lanes;

  let made = 0;
  const sync = (id: string, extra: OutboxJobOptions = {}): OutboxJobSpec => ({
    kind: 'chat.sync',
    payload: { proposalId: id, platform: 'slack' },
    orderingKey: `chat:slack:${id}`,
    coalesce: true,
    ...extra,
  });
  const heldBack = () => ({ runAt: new Date(Date.now() + HELD_MS) });
  const firstPost = (id: string, agentId: string): OutboxJobSpec => ({
    kind: 'chat.sync',
    payload: { proposalId: id, platform: 'slack' },
    orderingKey: `chat:slack:${id}`,
    coalesce: true,
    firstOfItsKey: { known: { proposal: proposalRecord({ id, agentId }), agent: agentRecord(agentId, at), approvals: [] } },
  });

  /** A proposal executing its first attempt, and its edit waiting to run `HELD_MS` from now. */
  async function executing(store: Store, label: string, options: { firstPostRunning?: boolean } = {}): Promise<string> {
    made += 1;
    const id = `prp_twin_${driver}_${label}_${made}`;
    const agentId = `agt_twin_${driver}_${made}`;
    await store.transaction(async (tx) => {
      await tx.insertAgent(agentRecord(agentId, at));
      await tx.insertProposal(
        proposalRecord({ id, agentId, tokenHash: `h_${id}`, status: 'executing', executionAttempts: 1, decidedBy: 'slack:U1', decidedAt: at }),
      );
    });
    // The proposal's first post, taken by its statement: with a lane that holds its runs, it is still running.
    if (options.firstPostRunning) await store.transaction(async (tx) => tx.enqueue([firstPost(id, agentId)], new Date()));
    await store.transaction(async (tx) => tx.enqueue([sync(id, heldBack())], new Date()));
    return id;
  }

  /** The result's transaction: its conditional update, and the edit it queues (as the core queues it). */
  async function recordResult(store: Store, id: string, options: { attempts?: number; begins?: boolean } = {}) {
    const now = new Date();
    await store.transaction(async (tx) => {
      if (options.begins) await tx.begin();
      tx.finishExecutingProposal(id, options.attempts ?? 1, { status: 'committed', consumedAt: now, result: { ok: true }, leaseUntil: null, updatedAt: now });
      await tx.enqueue([sync(id)], now);
    });
  }

  it.each([
    ['alone (its one statement commits by itself)', false],
    ['in a transaction that began', true],
  ])('recorded %s, a result claims the waiting edit for this worker, which runs it at once, with no claim, and forgets its wake-up', async (_label, begins) => {
    const { worker, store, runs } = await setUp(2);
    const id = await executing(store, begins ? 'begun' : 'alone');
    const [waiting] = await rowsOf(id);
    expect(waiting).toMatchObject({ status: 'queued', attempts: 0 });
    await recordResult(store, id, { begins });
    await vi.waitFor(async () => expect((await rowsOf(id)).map((row) => row.status)).toEqual(['done']), { timeout: 10_000, interval: 20 });
    // The waiting edit itself ran, claimed as a claim would, and the result added no job beside it.
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ jobId: waiting?.id, attempt: 1, lockedBy: `${worker.workerId}:1`, known: undefined });
    expect(runs[0]?.row).toMatchObject({ status: 'running', attempts: 1, lockedBy: `${worker.workerId}:1` });
    // Past the moment the edit was held back to, the lane made no claim: its wake-up was dropped.
    await new Promise((resolve) => setTimeout(resolve, HELD_MS * 2));
    expect(lanes.claims()).toBe(0);
  });

  it('a waiting edit behind an unfinished job of its message is left waiting, and the slot is given back', async () => {
    const { store, runs } = await setUp(1, { wake: false });
    const id = await executing(store, 'behind');
    // An older job of the same message the chat lane does not run (a reminder's ping): the edit waits behind it.
    const [edit] = await rowsOf(id);
    await lanes.changeJob(edit?.id, { id: -Math.abs(edit?.id ?? 1), kind: 'chat.followup' });
    await store.transaction(async (tx) => tx.enqueue([sync(id, heldBack())], new Date()));
    const [ping, waiting] = await rowsOf(id);
    expect([ping?.kind, waiting?.kind]).toEqual(['chat.followup', 'chat.sync']);
    await recordResult(store, id);
    expect((await rowsOf(id)).map((row) => [row.id, row.status, row.attempts])).toEqual([
      [ping?.id, 'queued', 0],
      [waiting?.id, 'queued', 0],
    ]);
    expect(runs).toHaveLength(0);
    // The lane's one slot is free again: the next result takes its waiting edit.
    const next = await executing(store, 'after_behind');
    await recordResult(store, next);
    await vi.waitFor(() => expect(runs.map((run) => run.row?.payload)).toEqual([{ proposalId: next, platform: 'slack' }]), { timeout: 10_000, interval: 20 });
  });

  it('a waiting edit behind a running job of its message (its first post, still on its way) waits for it: one job of a message at a time', async () => {
    const { store, runs, releaseAll } = await setUp(4, { hold: true });
    const id = await executing(store, 'behind_running', { firstPostRunning: true });
    await vi.waitFor(() => expect(runs).toHaveLength(1), { timeout: 10_000, interval: 20 });
    const [post, waiting] = await lanes.rowsOf(id);
    expect([post?.status, waiting?.status]).toEqual(['running', 'queued']);
    lanes.resetClaims();
    await recordResult(store, id);
    // The result committed while the post runs: its edit is neither taken nor run beside the post.
    expect((await lanes.rowsOf(id)).map((row) => [row.id, row.status])).toEqual([
      [post?.id, 'running'],
      [waiting?.id, 'queued'],
    ]);
    expect(runs.map((run) => run.jobId)).toEqual([post?.id]);
    releaseAll();
    // Once the post is done, the edit runs after it, claimed as any job.
    await vi.waitFor(() => expect(runs.map((run) => run.jobId)).toEqual([post?.id, waiting?.id]), { timeout: 10_000, interval: 20 });
    releaseAll();
    expect(lanes.claims()).toBeGreaterThan(0);
  });

  it('a waiting edit put back for a retry waits out its backoff', async () => {
    const { store, runs } = await setUp(2, { wake: false });
    const id = await executing(store, 'retrying');
    const [edit] = await rowsOf(id);
    await lanes.changeJob(edit?.id, { attempts: 1, lastError: 'Slack said: ratelimited' });
    await recordResult(store, id);
    expect((await rowsOf(id)).map((row) => [row.id, row.status, row.attempts])).toEqual([[edit?.id, 'queued', 1]]);
    expect(runs).toHaveLength(0);
  });

  it('with no edit waiting, the result queues its own, and the lane is woken to claim it', async () => {
    const { store, runs } = await setUp(2);
    const id = await executing(store, 'none_waiting');
    // The held-back edit already ran (a long execution): nothing of the message is unfinished.
    for (const row of await rowsOf(id)) await lanes.changeJob(row.id, { status: 'done' });
    lanes.resetClaims();
    await recordResult(store, id);
    await vi.waitFor(async () => expect((await rowsOf(id)).map((row) => row.status)).toEqual(['done', 'done']), { timeout: 10_000, interval: 20 });
    expect(runs).toHaveLength(1);
    expect(runs[0]?.known).toBeUndefined();
    expect(lanes.claims()).toBeGreaterThan(0);
  });

  it('a result whose update matches nothing takes nothing, and the slot is given back', async () => {
    const { store, runs } = await setUp(1, { wake: false });
    const id = await executing(store, 'stale');
    // Another claim of the execution (attempt 2) holds it now: this result is not the one.
    await expect(recordResult(store, id, { attempts: 2 })).rejects.toBeInstanceOf(NoLongerExecutingError);
    expect((await rowsOf(id)).map((row) => [row.status, row.attempts])).toEqual([['queued', 0]]);
    expect(runs).toHaveLength(0);
    const next = await executing(store, 'after_stale');
    await recordResult(store, next);
    await vi.waitFor(() => expect(runs.map((run) => run.row?.payload)).toEqual([{ proposalId: next, platform: 'slack' }]), { timeout: 10_000, interval: 20 });
  });
});
