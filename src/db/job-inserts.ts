import { sql, type SQL } from 'drizzle-orm';
import type { OutboxJobSpec } from '../core/ports.js';
import type { JobSlot, JobTaker } from '../outbox/ports.js';
import { jobRowOf, type RawJob } from './jobs-store.js';
import { rowsOf } from './rows.js';

// How a transaction's outbox jobs go into its one statement (src/db/transactions.ts): each a CTE of
// its own, queued, or claimed by its insert for this process's outbox (src/outbox/README.md, "Taken
// as queued"), with the rows of those read back to run them once the transaction committed.

const DEFAULT_MAX_ATTEMPTS = 25;

/**
 * A job a transaction queues. With `slot`, a slot of this process's outbox is held for it: the job
 * is inserted claimed (`firstOfItsKey`), or, with `twin`, the job of its kind and key that waits
 * already is claimed in its place (`twinTakingCtes`); either runs here after the commit.
 */
export interface QueuedJob {
  spec: OutboxJobSpec;
  at: Date;
  slot?: JobSlot;
  /** The slot is for the queued twin this coalescing job would have joined, not for an insert. */
  twin?: boolean;
}

/** Its slot holds the job it inserts (claimed), so no lane needs waking for it. */
export const insertedClaimed = (job: QueuedJob): boolean => job.slot !== undefined && !job.twin;

/** The CTE whose rows are what `job`'s slot took: its claimed insert, or its twin claimed in its place. */
const takenCte = (job: QueuedJob, index: number): string => (job.twin ? `job_${index}_twin_taken` : `job_${index}`);

/**
 * The rows of the jobs inserted claimed (`taken`), as the inserts wrote them, in their order among
 * the queued jobs; null for none.
 */
export function takenColumn(queued: readonly QueuedJob[]): SQL | null {
  const taken = queued.flatMap((job, index) => (job.slot ? [sql.raw(`(select row_to_json(taken) from ${takenCte(job, index)} taken)`)] : []));
  return taken.length > 0 ? sql`json_build_array(${sql.join(taken, sql`, `)}) as taken` : null;
}

/**
 * Holds a slot of this process's outbox for jobs of `queued` due now, so that the statement claims
 * them for this process. In a statement whose jobs go in whatever happens, for each job first of its
 * ordering key (`OutboxJobSpec.firstOfItsKey`): its insert claims it. In a `conditional` one (a
 * result's: its jobs go in only if its update matched, and it reads back which did), for each
 * coalescing job instead: the twin it would join, queued to run later, is claimed in its place when
 * next of its key (`twinTakingCtes`); which jobs went in then says which lanes to wake (none for it).
 */
export function takeSlots(queued: readonly QueuedJob[], takeJob: JobTaker | undefined, options: { conditional?: boolean } = {}): void {
  if (!takeJob) return;
  const conditional = options.conditional === true;
  for (const job of queued) {
    const due = !job.spec.runAt || job.spec.runAt <= job.at;
    const first = !conditional && job.spec.firstOfItsKey !== undefined;
    const twin = conditional && job.spec.coalesce === true && job.spec.orderingKey !== undefined;
    if (!due || !(first || twin)) continue;
    const slot = takeJob(job.spec.kind);
    if (!slot) continue;
    job.slot = slot;
    if (twin) job.twin = true;
  }
}

/**
 * After the statement that claimed them committed: runs each job it claimed (inserted so, or a twin
 * taken over), from its row as the statement read it back; a slot whose job it did not claim is
 * given back. `result` undefined (the transaction failed): every slot is given back.
 */
export function startTaken(queued: readonly QueuedJob[], result: unknown): void {
  const taken = queued.filter((job): job is QueuedJob & { slot: JobSlot } => job.slot !== undefined);
  if (taken.length === 0) return;
  const [row] = result === undefined ? [] : rowsOf<{ taken?: unknown }>(result);
  const rows = Array.isArray(row?.taken) ? (row.taken as Array<RawJob | null>) : [];
  taken.forEach(({ spec, slot, twin }, index) => {
    const row = rows[index];
    if (!row) return slot.release();
    // A twin was queued by an earlier change, not with what this transaction knows: it reads for itself.
    slot.run(jobRowOf(row), twin ? undefined : spec.firstOfItsKey?.known);
  });
}

/**
 * Sends the statement that carries `queued` (built by `send`, once their slots are held), and runs
 * the jobs it inserted claimed once it committed; a statement that failed gives their slots back.
 */
export async function sendTakingJobs<T>(
  send: () => Promise<T>,
  queued: readonly QueuedJob[],
  takeJob: JobTaker | undefined,
  options: { conditional?: boolean } = {},
): Promise<T> {
  takeSlots(queued, takeJob, options);
  let result: T;
  try {
    result = await send();
  } catch (error) {
    startTaken(queued, undefined);
    throw error;
  }
  startTaken(queued, result);
  return result;
}

/** A queued job's times as SQL: when it was queued (`time`), and when it falls due (`runAt`). */
function jobTimes({ spec, at }: QueuedJob): { time: SQL; runAt: SQL } {
  return {
    time: sql`${at.toISOString()}::timestamptz`,
    // Reminders and escalations are queued at propose time to run later.
    runAt: sql`${(spec.runAt ?? at).toISOString()}::timestamptz`,
  };
}

/** The insert of `spec` as a queued job, only `where` that holds (sql`` for always): `returning 1`. */
function queuedInsert(job: QueuedJob, where: SQL): SQL {
  const { spec } = job;
  const { time, runAt } = jobTimes(job);
  return sql`insert into jobs (kind, payload, ordering_key, status, max_attempts, run_at, created_at, updated_at)
    select ${spec.kind}, ${JSON.stringify(spec.payload)}::jsonb, ${spec.orderingKey ?? null}, 'queued', ${spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS}, ${runAt}, ${time}, ${time}
    ${where}
    returning 1`;
}

/**
 * One job's CTE (`job_<index>`) in its transaction's statement: claimed by its insert when it holds
 * a slot, queued otherwise, and, for a coalescing job, queued only when none of its kind and key is
 * waiting already. With `onlyIf`, inserted only if that holds (a result's update matched).
 */
export function jobInsertCte(job: QueuedJob, index: number, onlyIf?: SQL): SQL {
  const { spec, at, slot } = job;
  const name = sql.raw(`job_${index}`);
  if (slot && job.twin) return twinTakingCtes(job, slot, index, onlyIf);
  if (slot) {
    // Claimed by its insert, as a claim would (attempt 1, stamped, leased): the first of its ordering
    // key, nothing of the key can be queued before it, and nothing coalesces into a running job.
    if (onlyIf) throw new Error('a job is inserted claimed only by a statement whose every job goes in');
    const { time, runAt } = jobTimes(job);
    return sql`${name} as (
      insert into jobs (kind, payload, ordering_key, status, attempts, max_attempts, run_at, locked_until, locked_by, created_at, updated_at)
      select ${spec.kind}, ${JSON.stringify(spec.payload)}::jsonb, ${spec.orderingKey ?? null}, 'running', 1, ${spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS},
        ${runAt}, ${new Date(at.getTime() + slot.leaseMs).toISOString()}::timestamptz, ${slot.lockedBy}, ${time}, ${time}
      returning *)`;
  }
  const also = onlyIf ? sql` and ${onlyIf}` : sql``;
  if (!(spec.coalesce && spec.orderingKey)) return sql`${name} as (${queuedInsert(job, onlyIf ? sql`where ${onlyIf}` : sql``)})`;
  // FOR UPDATE closes the race with a worker claiming the waiting job right now: this waits for the
  // claim to commit, then sees the job running and queues a new one after it.
  return sql`${name} as (${queuedInsert(
    job,
    sql`where not exists (
      select 1 from jobs
      where ordering_key = ${spec.orderingKey} and kind = ${spec.kind} and status = 'queued'
      for update)${also}`,
  )})`;
}

/**
 * A coalescing job due now whose slot may take its twin: the job of its kind and key that waits,
 * queued by an earlier change to run later (a chat edit held back while an execution runs, in case
 * its result comes first). This change's job would join it (`coalesce`); instead, when the twin is
 * next of its key (no job of the key before it unfinished, as a claim checks) and has never run (a
 * retry waits out its backoff), the statement claims it for this slot, so it runs now, once the
 * transaction committed. Three CTEs: the twin, locked once (a claim of it under way is waited for,
 * then it is no longer queued), read by the other two; the twin claimed (`_twin_taken`, its row read
 * back); this job inserted only when no twin waits, as any coalescing job.
 */
function twinTakingCtes(job: QueuedJob, slot: JobSlot, index: number, onlyIf?: SQL): SQL {
  const { spec, at } = job;
  const twin = sql.raw(`job_${index}_twin`);
  const also = onlyIf ? sql` and ${onlyIf}` : sql``;
  return sql`${twin} as (
      select id, attempts from jobs
      where ordering_key = ${spec.orderingKey ?? null} and kind = ${spec.kind} and status = 'queued'${also}
      for update),
    ${sql.raw(`job_${index}_twin_taken`)} as (
      update jobs set status = 'running', attempts = 1, locked_until = ${new Date(at.getTime() + slot.leaseMs).toISOString()}::timestamptz,
        locked_by = ${slot.lockedBy}, updated_at = ${at.toISOString()}::timestamptz
      where id in (select t.id from ${twin} t where t.attempts = 0)
        and not exists (
          select 1 from jobs o
          where o.ordering_key = jobs.ordering_key and o.id < jobs.id and o.status in ('queued', 'running'))
      returning *),
    ${sql.raw(`job_${index}`)} as (${queuedInsert(job, sql`where not exists (select 1 from ${twin})${also}`)})`;
}
