import { and, desc, eq, lt, sql } from 'drizzle-orm';
import type { Db } from './database.js';
import { jobs } from './schema.js';

export type JobRow = typeof jobs.$inferSelect;
export type JobStatus = 'queued' | 'running' | 'done' | 'dead';

/** postgres.js answers `execute` with an array, PGlite with `{ rows }`. */
function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

interface RawJob {
  id: string | number;
  kind: string;
  payload: Record<string, unknown> | string;
  ordering_key: string | null;
  status: string;
  attempts: number;
  max_attempts: number;
  run_at: string | Date;
  locked_until: string | Date | null;
  last_error: string | null;
  created_at: string | Date;
  updated_at: string | Date;
}

const toDate = (value: string | Date | null): Date | null => (value === null ? null : new Date(value));

function fromRaw(row: RawJob): JobRow {
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
    lastError: row.last_error,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** Data access for the outbox's jobs table. */
export function createJobStore(db: Db) {
  return {
    /**
     * Claims due jobs for this worker. SKIP LOCKED lets every replica claim at once without two
     * claiming one job; a job runs only when no older unfinished job shares its ordering key, so the
     * edits of one chat message stay in order. A running job whose lease ran out (its worker died)
     * is claimable again.
     */
    async claimDue(now: Date, limit: number, leaseMs: number): Promise<JobRow[]> {
      // Raw SQL bypasses drizzle's column mapping: timestamps go as ISO text with an explicit cast.
      const at = sql`${now.toISOString()}::timestamptz`;
      const leaseUntil = sql`${new Date(now.getTime() + leaseMs).toISOString()}::timestamptz`;
      const result = await db.execute(sql`
        update jobs set status = 'running', attempts = attempts + 1, locked_until = ${leaseUntil}, updated_at = ${at}
        where id in (
          select j.id from jobs j
          where ((j.status = 'queued' and j.run_at <= ${at}) or (j.status = 'running' and j.locked_until < ${at}))
            and (j.ordering_key is null or not exists (
              select 1 from jobs o
              where o.ordering_key = j.ordering_key and o.id < j.id and o.status in ('queued', 'running')))
          order by j.run_at, j.id
          limit ${limit}
          for update skip locked)
        returning *`);
      return rowsOf<RawJob>(result).map(fromRaw);
    },
    async complete(id: number, now: Date): Promise<void> {
      await db.update(jobs).set({ status: 'done', lockedUntil: null, lastError: null, updatedAt: now }).where(eq(jobs.id, id));
    },
    async reschedule(id: number, runAt: Date, error: string, now: Date): Promise<void> {
      await db.update(jobs).set({ status: 'queued', lockedUntil: null, runAt, lastError: error, updatedAt: now }).where(eq(jobs.id, id));
    },
    async bury(id: number, error: string, now: Date): Promise<void> {
      await db.update(jobs).set({ status: 'dead', lockedUntil: null, lastError: error, updatedAt: now }).where(eq(jobs.id, id));
    },
    /** Puts a dead (or any unfinished) job back in the queue, with a fresh set of attempts. */
    async retry(id: number, now: Date): Promise<JobRow | null> {
      const [row] = await db
        .update(jobs)
        .set({ status: 'queued', attempts: 0, runAt: now, lockedUntil: null, updatedAt: now })
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
    async countByStatus(): Promise<Record<string, number>> {
      const rows = await db.select({ status: jobs.status, count: sql<number>`count(*)::int` }).from(jobs).groupBy(jobs.status);
      return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
    },
    /** Finished jobs are kept a day for inspection, then dropped; dead ones stay until retried. */
    async pruneDone(olderThan: Date): Promise<void> {
      await db.delete(jobs).where(and(eq(jobs.status, 'done'), lt(jobs.updatedAt, olderThan)));
    },
  };
}

export type JobStore = ReturnType<typeof createJobStore>;
