import { and, desc, eq, inArray, sql, type ColumnsSelection, type SQL } from 'drizzle-orm';
import type { TypedQueryBuilder } from 'drizzle-orm/query-builders/query-builder';
import type { JobClaim, JobCompletion, LastWrite } from '../core/jobs.js';
import type { Db } from './database.js';
import { jobs } from './schema.js';
import type { ClaimedJob, ClaimLane, JobRow, JobStatus, JobStore, NewJob, OutboxBacklog } from '../outbox/ports.js';
import { rowsOf } from './rows.js';

// The table's row is the outbox's `JobRow`; this fails to compile when the two drift apart.
type JobsTableRow = typeof jobs.$inferSelect;
const sameRow: [JobsTableRow, JobRow] extends [JobRow, JobsTableRow] ? true : never = true;
void sameRow;

export interface RawJob {
  id: string | number;
  kind: string;
  payload: Record<string, unknown> | string;
  ordering_key: string | null;
  status: string;
  attempts: number;
  max_attempts: number;
  run_at: string | Date;
  locked_until: string | Date | null;
  locked_by: string | null;
  last_error: string | null;
  created_at: string | Date;
  updated_at: string | Date;
}

const toDate = (value: string | Date | null): Date | null => (value === null ? null : new Date(value));

/** A job row as the database returns it (a claim's rows, or one row as JSON), as the outbox reads it. */
export function jobRowOf(row: RawJob): JobRow {
  return {
    id: Number(row.id),
    kind: row.kind,
    payload: typeof row.payload === 'string' ? (JSON.parse(row.payload) as Record<string, unknown>) : row.payload,
    orderingKey: row.ordering_key,
    status: row.status,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    runAt: new Date(row.run_at),
    lockedUntil: toDate(row.locked_until),
    lockedBy: row.locked_by,
    lastError: row.last_error,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** `case <column> when <key> then <count> … else 0 end`: what this worker already runs under each key. */
function runningCount(column: SQL, running: ReadonlyMap<string, number> | undefined): SQL {
  const held = [...(running ?? new Map<string, number>())].filter(([, count]) => count > 0);
  if (held.length === 0) return sql`0`;
  return sql`(case ${column} ${sql.join(
    held.map(([key, count]) => sql`when ${key} then ${count}`),
    sql` `,
  )} else 0 end)`;
}

/**
 * The ids a capped lane may start, oldest first: per destination, then per agent, no more than the
 * cap less what this worker already runs there. The caps are applied to every due job before the
 * window is cut, so a thousand due jobs of one agent at its cap cannot fill the window and hide
 * another agent's job behind them.
 */
function cappedCandidates(due: SQL, lane: ClaimLane, window: number): SQL {
  const destinationRoom = lane.perDestination
    ? sql`d.destination is null or d.destination_rank <= ${lane.perDestination}::int - ${runningCount(sql`d.destination`, lane.running)}`
    : sql`true`;
  const agentRoom = lane.perAgent
    ? sql`a.agent is null or a.agent_rank <= ${lane.perAgent}::int - ${runningCount(sql`a.agent`, lane.runningByAgent)}`
    : sql`true`;
  return sql`
    select a.id from (
      select d.id, d.run_at, d.agent, row_number() over (partition by d.agent order by d.run_at, d.id) as agent_rank
      from (
        select j.id, j.run_at, j.payload->>'destination' as destination, j.payload->>'agentId' as agent,
               row_number() over (partition by j.payload->>'destination' order by j.run_at, j.id) as destination_rank
        from jobs j where ${due}) d
      where ${destinationRoom}) a
    where ${agentRoom}
    order by a.run_at, a.id
    limit ${window}::int`;
}

/** `id` and claim stamp of held jobs, as one JSON parameter (a statement for many jobs). */
const claimsJson = (claimed: readonly ClaimedJob[]) => JSON.stringify(claimed.map((job) => ({ id: job.id, stamp: job.lockedBy })));

/** The row is still ours: running, under the claim stamp we were handed. */
const heldBy = (job: ClaimedJob) => and(eq(jobs.id, job.id), eq(jobs.status, 'running'), job.lockedBy === null ? sql`false` : eq(jobs.lockedBy, job.lockedBy));

/** Jobs stored on their own, outside any state change: the inbox's clicks (src/outbox/inbox.ts). */
function standaloneJobs(db: Db) {
  return {
    /**
     * Stores jobs in one statement (one commit for a burst of clicks); their ids in the order given.
     * A sequence hands out values in the order the rows of one INSERT are produced, which is the
     * order of its VALUES list.
     */
    async insertMany(newJobs: readonly NewJob[], now: Date): Promise<number[]> {
      if (newJobs.length === 0) return [];
      const rows = await db
        .insert(jobs)
        .values(
          newJobs.map((job) => ({
            kind: job.kind,
            payload: job.payload,
            orderingKey: job.orderingKey ?? null,
            status: 'queued',
            maxAttempts: job.maxAttempts,
            runAt: now,
            createdAt: now,
            updatedAt: now,
          })),
        )
        .returning({ id: jobs.id });
      return rows.map((row) => row.id).sort((a, b) => a - b);
    },
    /** Deletes a job nobody has started; false once a worker claimed it (or it is gone). */
    async withdraw(id: number): Promise<boolean> {
      const rows = await db
        .delete(jobs)
        .where(and(eq(jobs.id, id), eq(jobs.status, 'queued')))
        .returning({ id: jobs.id });
      return rows.length === 1;
    },
    /** Of these jobs, the ids still queued or running. */
    async unfinished(ids: readonly number[]): Promise<Set<number>> {
      if (ids.length === 0) return new Set();
      const rows = await db
        .select({ id: jobs.id })
        .from(jobs)
        .where(and(inArray(jobs.id, [...ids]), inArray(jobs.status, ['queued', 'running'])));
      return new Set(rows.map((row) => row.id));
    },
  };
}

/** Leases beyond a claim's own: renewed while a job runs, or all ended at once. */
function leaseUpdates(db: Db) {
  return {
    /**
     * Extends the lease of jobs this worker still holds (fenced by their claim stamps, like every
     * outcome); the ids whose claim still held. A lane with a short lease renews it while its jobs
     * run, so a dead worker's jobs are free again within that short lease while a live one keeps its own.
     */
    async renew(claimed: readonly ClaimedJob[], lockedUntil: Date): Promise<Set<number>> {
      const held = claimed.filter((job) => job.lockedBy !== null);
      if (held.length === 0) return new Set();
      const result = await db.execute(sql`
        update jobs set locked_until = ${lockedUntil.toISOString()}::timestamptz
        from jsonb_to_recordset(${claimsJson(held)}::jsonb) as claim(id bigint, stamp text)
        where jobs.id = claim.id and jobs.status = 'running' and jobs.locked_by = claim.stamp
        returning jobs.id`);
      return new Set(rowsOf<{ id: string | number }>(result).map((row) => Number(row.id)));
    },
    /**
     * Ends every claim at once, so the jobs they hold are claimable now. Only for a process that
     * alone has the database open (the embedded one, whose data directory it locks): a claim it
     * finds at start belongs to a process that died, and need not wait for its lease.
     */
    async releaseAllClaims(now: Date): Promise<number> {
      const rows = await db.update(jobs).set({ lockedUntil: now, updatedAt: now }).where(eq(jobs.status, 'running')).returning({ id: jobs.id });
      return rows.length;
    },
  };
}

/**
 * Whether a job of this ordering key is queued behind the one finishing, due now: the claim skipped it
 * while this one ran, and the worker claims again for it at once rather than at its next poll. Asked
 * in the completion itself, so it costs no round trip.
 */
function followedSql(now: SQL): SQL {
  return sql`(jobs.ordering_key is not null and exists (
    select 1 from jobs o where o.ordering_key = jobs.ordering_key and o.id > jobs.id and o.status = 'queued' and o.run_at <= ${now}))`;
}

/**
 * A held job's completion, with placeholders for the job, its claim stamp and the time: the outbox's
 * most frequent write, built once, alone or after a handler's last write. The placeholders' names
 * are the completion's own, apart from any a last write uses.
 */
const completedAt = sql`${sql.placeholder('completedAt')}::timestamptz`;
const completion = {
  set: { status: 'done', lockedUntil: null, lockedBy: null, lastError: null, updatedAt: completedAt },
  where: and(eq(jobs.id, sql.placeholder('completedJob')), eq(jobs.status, 'running'), eq(jobs.lockedBy, sql.placeholder('completedStamp'))),
  returning: { id: jobs.id, followed: sql<boolean>`${followedSql(completedAt)}` },
  values: (job: JobClaim, now: Date) => ({ completedJob: job.id, completedStamp: job.lockedBy, completedAt: now.toISOString() }),
} as const;

/**
 * The completion of held jobs, each fenced by its own claim stamp: answers the id of each whose claim
 * still held, and whether a job of its ordering key waits behind it. `completeAll`'s statement, and
 * the CTE of a click's decision (`jobCompletionCte`).
 */
function heldJobsDone(held: readonly ClaimedJob[], now: Date): SQL {
  const at = sql`${now.toISOString()}::timestamptz`;
  return sql`update jobs set status = 'done', locked_until = null, locked_by = null, last_error = null, updated_at = ${at}
    from jsonb_to_recordset(${claimsJson(held)}::jsonb) as claim(id bigint, stamp text)
    where jobs.id = claim.id and jobs.status = 'running' and jobs.locked_by = claim.stamp
    returning jobs.id, ${followedSql(at)} as followed`;
}

/** A running job's completion as the CTE `completed_job` of another statement (a click's decision, src/db/transactions.ts). */
export function jobCompletionCte(job: JobClaim, now: Date): SQL {
  return sql`completed_job as (${heldJobsDone([job], now)})`;
}

/** A write built with placeholders: a data-modifying statement with RETURNING, which can be prepared. */
type PreparableWrite = TypedQueryBuilder<ColumnsSelection> & { prepare(name: string): { execute(values?: Record<string, unknown>): Promise<unknown> } };

/**
 * A store's write as a job's last write (src/core/jobs.ts, `LastWrite`): prepared once alone (as
 * `name`), and once as the CTE of the job's completion, so sending it with the completion costs one
 * round trip and no statement built per call. The write must be one that may land twice (see
 * `LastWrite`). Returns the write for given values of its placeholders.
 */
export function preparedLastWrite(db: Db, name: string, write: PreparableWrite): (values: Record<string, unknown>) => LastWrite {
  const alone = write.prepare(name);
  const withCompletion = db
    .with(db.$with('last_write').as(write))
    .update(jobs)
    .set(completion.set)
    .where(completion.where)
    .returning(completion.returning)
    .prepare(`${name}_job_done`);
  return (values) => ({
    async send() {
      await alone.execute(values);
    },
    async completing(job: JobClaim, now: Date): Promise<JobCompletion> {
      // A job never claimed has no stamp and matches nothing: the write lands, the completion does not.
      const [row] = await withCompletion.execute({ ...values, ...completion.values(job, now) });
      return { held: row !== undefined, followed: Boolean(row?.followed) };
    },
  });
}

/** Data access for the outbox's jobs table. */
export function createJobStore(db: Db): JobStore {
  const completeHeld = db.update(jobs).set(completion.set).where(completion.where).returning(completion.returning).prepare('twokey_job_complete');
  async function completeOne(job: ClaimedJob, now: Date): Promise<Map<number, { followed: boolean }>> {
    if (job.lockedBy === null) return new Map();
    const rows = await completeHeld.execute(completion.values(job, now));
    return new Map(rows.map((row) => [Number(row.id), { followed: Boolean(row.followed) }]));
  }
  return {
    ...standaloneJobs(db),
    ...leaseUpdates(db),
    /**
     * Claims due jobs for this worker. SKIP LOCKED lets every replica claim at once without two
     * claiming one job; a job runs only when no older unfinished job shares its ordering key, so the
     * edits of one chat message stay in order. A running job whose lease ran out (its worker died)
     * is claimable again. Each claim is stamped `locked_by = <worker>:<attempt>`: the outcome
     * updates below only land while that stamp still holds.
     *
     * A lane claims only its own kinds; with `perDestination`, no destination (`payload.destination`)
     * gets more than that many jobs running in this worker, counting `running` ones already held;
     * with `perAgent`, no agent (`payload.agentId`) either, across its destinations.
     */
    async claimDue(now: Date, limit: number, leaseMs: number, lane: ClaimLane = {}): Promise<JobRow[]> {
      if (limit <= 0) return [];
      // Raw SQL bypasses drizzle's column mapping: timestamps go as ISO text with an explicit cast.
      const at = sql`${now.toISOString()}::timestamptz`;
      const leaseUntil = sql`${new Date(now.getTime() + leaseMs).toISOString()}::timestamptz`;
      const list = (values: readonly string[]) =>
        sql.join(
          values.map((value) => sql`${value}`),
          sql`, `,
        );
      const kindFilter = lane.kinds
        ? sql`and j.kind in (${list(lane.kinds)})`
        : lane.excludeKinds?.length
          ? sql`and j.kind not in (${list(lane.excludeKinds)})`
          : sql``;
      const dueNow = sql`((j.status = 'queued' and j.run_at <= ${at}) or (j.status = 'running' and j.locked_until < ${at}))`;
      const due = sql`${dueNow} ${kindFilter}
            and (j.ordering_key is null or not exists (
              select 1 from jobs o
              where o.ordering_key = j.ordering_key and o.id < j.id and o.status in ('queued', 'running')))`;
      const window = Math.max(limit * 20, 200);
      const candidates =
        lane.perDestination || lane.perAgent
          ? cappedCandidates(due, lane, window)
          : sql`select j.id from jobs j where ${due} order by j.run_at, j.id limit ${window}::int`;
      const result = await db.execute(sql`
        update jobs set status = 'running', attempts = attempts + 1, locked_until = ${leaseUntil},
          locked_by = ${lane.workerId ?? 'worker'} || ':' || (attempts + 1), updated_at = ${at}
        where id in (
          select j.id from jobs j
          where j.id in (${candidates}) and ${dueNow}
          order by j.run_at, j.id
          limit ${limit}::int
          for update skip locked)
        returning *`);
      return rowsOf<RawJob>(result).map(jobRowOf);
    },
    /** Each outcome lands only while the claim still holds; `false` means another worker took the job over. */
    async complete(job: ClaimedJob, now: Date): Promise<boolean> {
      return (await completeOne(job, now)).size === 1;
    },
    /** `complete` for many jobs in one statement; the ids whose claim still held, and whether a job of its key waits. */
    async completeAll(claimed: readonly ClaimedJob[], now: Date): Promise<Map<number, { followed: boolean }>> {
      const held = claimed.filter((job) => job.lockedBy !== null);
      if (held.length === 0) return new Map();
      if (held.length === 1) return completeOne(held[0] as ClaimedJob, now);
      const result = await db.execute(heldJobsDone(held, now));
      return new Map(rowsOf<{ id: string | number; followed: boolean }>(result).map((row) => [Number(row.id), { followed: Boolean(row.followed) }]));
    },
    async reschedule(job: ClaimedJob, runAt: Date, error: string, now: Date): Promise<boolean> {
      const rows = await db
        .update(jobs)
        .set({ status: 'queued', lockedUntil: null, lockedBy: null, runAt, lastError: error, updatedAt: now })
        .where(heldBy(job))
        .returning({ id: jobs.id });
      return rows.length === 1;
    },
    async bury(job: ClaimedJob, error: string, now: Date): Promise<boolean> {
      const rows = await db
        .update(jobs)
        .set({ status: 'dead', lockedUntil: null, lockedBy: null, lastError: error, updatedAt: now })
        .where(heldBy(job))
        .returning({ id: jobs.id });
      return rows.length === 1;
    },
    /** Puts a dead (or any unfinished) job back in the queue, with a fresh set of attempts. */
    async retry(id: number, now: Date): Promise<JobRow | null> {
      const [row] = await db
        .update(jobs)
        .set({ status: 'queued', attempts: 0, runAt: now, lockedUntil: null, lockedBy: null, updatedAt: now })
        .where(and(eq(jobs.id, id), sql`${jobs.status} <> 'done'`))
        .returning();
      return row ?? null;
    },
    async list(filter: { status?: JobStatus; limit?: number }): Promise<JobRow[]> {
      return db
        .select()
        .from(jobs)
        .where(filter.status ? eq(jobs.status, filter.status) : undefined)
        .orderBy(desc(jobs.id))
        .limit(filter.limit ?? 100);
    },
    /** Jobs not done, by status (done ones are not counted: the index on status then bounds the work to the backlog and the dead). */
    async countByStatus(): Promise<Record<string, number>> {
      const rows = await db
        .select({ status: jobs.status, count: sql<number>`count(*)::int` })
        .from(jobs)
        .where(inArray(jobs.status, ['queued', 'running', 'dead']))
        .groupBy(jobs.status);
      return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
    },
    /**
     * Per kind of unfinished job: how many are due and not running (queued past their `run_at`, or
     * running under a lease that ran out), and how long the oldest of them has waited. Only queued
     * and running rows are read, through the index on status and run_at.
     */
    async backlog(now: Date): Promise<OutboxBacklog[]> {
      const at = sql`${now.toISOString()}::timestamptz`;
      const result = await db.execute(sql`
        select kind,
               count(*) filter (where due_since is not null)::int as due,
               coalesce(extract(epoch from ${at} - min(due_since)), 0)::float8 as oldest_due_seconds
        from (
          select kind,
                 case when status = 'queued' and run_at <= ${at} then run_at
                      when status = 'running' and locked_until < ${at} then locked_until end as due_since
          from jobs where status in ('queued', 'running')) unfinished
        group by kind`);
      return rowsOf<{ kind: string; due: number; oldest_due_seconds: number | string }>(result).map((row) => ({
        kind: row.kind,
        due: Number(row.due),
        oldestDueSeconds: Math.max(0, Number(row.oldest_due_seconds)),
      }));
    },
  };
}
