import { sql, type SQL } from 'drizzle-orm';
import type { OutboxJobSpec } from '../core/ports.js';
import type { JobSlot, JobTaker } from '../outbox/ports.js';
import { jobRowOf, type RawJob } from './jobs-store.js';
import { rowsOf } from './rows.js';

// How a transaction's outbox jobs go into its one statement (src/db/transactions.ts): each a CTE of
// its own, queued, or claimed by its insert for this process's outbox (src/outbox/README.md, "Taken
// as queued"), with the rows of those read back to run them once the transaction committed.

const DEFAULT_MAX_ATTEMPTS = 25;

/** A job a transaction queues; with `slot`, inserted claimed by this process, to run here after the commit. */
export interface QueuedJob {
  spec: OutboxJobSpec;
  at: Date;
  slot?: JobSlot;
}

/**
 * The rows of the jobs inserted claimed (`taken`), as the inserts wrote them, in their order among
 * the queued jobs; null for none.
 */
export function takenColumn(queued: readonly QueuedJob[]): SQL | null {
  const taken = queued.flatMap((job, index) => (job.slot ? [sql.raw(`(select row_to_json(taken) from job_${index} taken)`)] : []));
  return taken.length > 0 ? sql`json_build_array(${sql.join(taken, sql`, `)}) as taken` : null;
}

/**
 * Holds a slot of this process's outbox for each job of `queued` that is the first of its ordering
 * key and due now (`OutboxJobSpec.firstOfItsKey`): the insert then claims it. Only for a statement
 * whose jobs are not conditioned on an update that may match nothing (a result's): every job of
 * the statement goes in once it commits.
 */
export function takeSlots(queued: readonly QueuedJob[], takeJob: JobTaker | undefined): void {
  if (!takeJob) return;
  for (const job of queued) {
    const due = !job.spec.runAt || job.spec.runAt <= job.at;
    if (job.spec.firstOfItsKey && due) {
      const slot = takeJob(job.spec.kind);
      if (slot) job.slot = slot;
    }
  }
}

/**
 * After the statement that inserted them committed: runs each job inserted claimed, from its row as
 * the statement read it back. `result` undefined (the transaction failed): every slot is given back.
 */
export function startTaken(queued: readonly QueuedJob[], result: unknown): void {
  const taken = queued.filter((job): job is QueuedJob & { slot: JobSlot } => job.slot !== undefined);
  if (taken.length === 0) return;
  const [row] = result === undefined ? [] : rowsOf<{ taken?: unknown }>(result);
  const rows = Array.isArray(row?.taken) ? (row.taken as Array<RawJob | null>) : [];
  taken.forEach(({ spec, slot }, index) => {
    const inserted = rows[index];
    if (!inserted) return slot.release();
    slot.run(jobRowOf(inserted), spec.firstOfItsKey?.known);
  });
}

/**
 * Sends the statement that carries `queued` (built by `send`, once their slots are held), and runs
 * the jobs it inserted claimed once it committed; a statement that failed gives their slots back.
 */
export async function sendTakingJobs(send: () => Promise<unknown>, queued: readonly QueuedJob[], takeJob: JobTaker | undefined): Promise<void> {
  takeSlots(queued, takeJob);
  let result: unknown;
  try {
    result = await send();
  } catch (error) {
    startTaken(queued, undefined);
    throw error;
  }
  startTaken(queued, result);
}

/**
 * One job's CTE (`job_<index>`) in its transaction's statement: claimed by its insert when it holds
 * a slot, queued otherwise, and, for a coalescing job, queued only when none of its kind and key is
 * waiting already. With `onlyIf`, inserted only if that holds (a result's update matched).
 */
export function jobInsertCte({ spec, at, slot }: QueuedJob, index: number, onlyIf?: SQL): SQL {
  const time = sql`${at.toISOString()}::timestamptz`;
  // Reminders and escalations are queued at propose time to run later.
  const runAt = sql`${(spec.runAt ?? at).toISOString()}::timestamptz`;
  const name = sql.raw(`job_${index}`);
  if (slot) {
    // Claimed by its insert, as a claim would (attempt 1, stamped, leased): the first of its ordering
    // key, nothing of the key can be queued before it, and nothing coalesces into a running job.
    if (onlyIf) throw new Error('a job is inserted claimed only by a statement whose every job goes in');
    return sql`${name} as (
      insert into jobs (kind, payload, ordering_key, status, attempts, max_attempts, run_at, locked_until, locked_by, created_at, updated_at)
      select ${spec.kind}, ${JSON.stringify(spec.payload)}::jsonb, ${spec.orderingKey ?? null}, 'running', 1, ${spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS},
        ${runAt}, ${new Date(at.getTime() + slot.leaseMs).toISOString()}::timestamptz, ${slot.lockedBy}, ${time}, ${time}
      returning *)`;
  }
  const values = sql`select ${spec.kind}, ${JSON.stringify(spec.payload)}::jsonb, ${spec.orderingKey ?? null}, 'queued', ${spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS}, ${runAt}, ${time}, ${time}`;
  const also = onlyIf ? sql` and ${onlyIf}` : sql``;
  if (!(spec.coalesce && spec.orderingKey)) {
    const condition = onlyIf ? sql` where ${onlyIf}` : sql``;
    return sql`${name} as (insert into jobs (kind, payload, ordering_key, status, max_attempts, run_at, created_at, updated_at) ${values}${condition} returning 1)`;
  }
  // FOR UPDATE closes the race with a worker claiming the waiting job right now: this waits for the
  // claim to commit, then sees the job running and queues a new one after it.
  return sql`${name} as (
    insert into jobs (kind, payload, ordering_key, status, max_attempts, run_at, created_at, updated_at)
    ${values}
    where not exists (
      select 1 from jobs
      where ordering_key = ${spec.orderingKey} and kind = ${spec.kind} and status = 'queued'
      for update)${also}
    returning 1)`;
}
