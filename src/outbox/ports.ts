import type { JobClaim } from '../core/jobs.js';

/**
 * The storage the outbox needs, declared here and implemented by src/db (`jobs-store.ts`,
 * `callback-store.ts`); the runtime hands the implementations in.
 */

/** One row of the outbox: a job, its claim and its attempts. */
export interface JobRow {
  id: number;
  kind: string;
  payload: Record<string, unknown>;
  /** Jobs with the same key run one at a time, oldest first. */
  orderingKey: string | null;
  status: string;
  attempts: number;
  maxAttempts: number;
  runAt: Date;
  lockedUntil: Date | null;
  /** The claim that holds a running job (worker id and attempt); every outcome update names it. */
  lockedBy: string | null;
  lastError: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export type JobStatus = 'queued' | 'running' | 'done' | 'dead';

/** The unfinished jobs of one kind that wait for a worker (`twokey_outbox_due_jobs`). */
export interface OutboxBacklog {
  kind: string;
  /** Due now and not running. */
  due: number;
  /** How long the oldest of them has been due; 0 when none is. */
  oldestDueSeconds: number;
}

/** Which jobs one lane of the worker claims. */
export interface ClaimLane {
  /** Stamped on each claim with the attempt number; outcome updates must present it. */
  workerId?: string;
  /** Only these kinds… */
  kinds?: readonly string[];
  /** …or every kind but these. */
  excludeKinds?: readonly string[];
  /** At most this many running jobs per `payload.destination` in this worker. */
  perDestination?: number;
  /** Jobs this worker already runs, per destination. */
  running?: ReadonlyMap<string, number>;
  /** At most this many running jobs per `payload.agentId` in this worker, whatever their destinations. */
  perAgent?: number;
  /** Jobs this worker already runs, per agent. */
  runningByAgent?: ReadonlyMap<string, number>;
}

/**
 * A slot of one of this process's outbox lanes, held for a job a transaction's statement claims
 * for this process: a job first of its ordering key it inserts (`OutboxJobSpec.firstOfItsKey`), or
 * the waiting twin a result's coalescing job would join (src/outbox/README.md). The statement writes
 * it `running`, attempt 1, stamped `lockedBy` and leased for `leaseMs` from its time, as a claim
 * would. Once the transaction committed the job runs here (`run`); if it failed, or claimed nothing,
 * the slot is given back (`release`). Exactly one of the two is called.
 */
export interface JobSlot {
  /** The claim stamp of the job's first attempt (worker id and attempt). */
  lockedBy: string;
  leaseMs: number;
  /** Runs the job, claimed and committed, with what its transaction knew, if anything (see `JobContext.known`). */
  run(job: JobRow, known: unknown): void;
  release(): void;
}

/** A slot for a job of this kind, due now, for a statement to claim; null when no lane here has one free. */
export type JobTaker = (kind: string) => JobSlot | null;

/** A job as its outcome names it: its id and the claim stamp it runs under. */
export type ClaimedJob = JobClaim;

/**
 * A job stored on its own, outside any state change: a click from chat, written before it is
 * answered (src/outbox/inbox.ts). Due at once.
 */
export interface NewJob {
  kind: string;
  payload: Record<string, unknown>;
  orderingKey?: string | null;
  maxAttempts: number;
}

/** The outbox's jobs table. Every outcome lands only while the job's claim still holds. */
export interface JobStore {
  /** Claims due jobs for this worker (one lane's kinds, within its per-destination and per-agent caps), in order per ordering key. */
  claimDue(now: Date, limit: number, leaseMs: number, lane?: ClaimLane): Promise<JobRow[]>;
  /** `false` means another worker took the job over. */
  complete(job: ClaimedJob, now: Date): Promise<boolean>;
  /**
   * `complete` for many jobs at once: the ids whose claim still held, each with whether a job of its
   * ordering key is queued behind it (due now), which its completion lets run.
   */
  completeAll(claimed: readonly ClaimedJob[], now: Date): Promise<Map<number, { followed: boolean }>>;
  reschedule(job: ClaimedJob, runAt: Date, error: string, now: Date): Promise<boolean>;
  bury(job: ClaimedJob, error: string, now: Date): Promise<boolean>;
  /** Puts a dead (or any unfinished) job back in the queue, with a fresh set of attempts. */
  retry(id: number, now: Date): Promise<JobRow | null>;
  list(filter: { status?: JobStatus; limit?: number }): Promise<JobRow[]>;
  /** Jobs not done, by status. */
  countByStatus(): Promise<Record<string, number>>;
  /** Per kind of unfinished job: how many are due and not running, and how long the oldest has waited. */
  backlog(now: Date): Promise<OutboxBacklog[]>;
  /** Extends the lease of jobs this worker still holds; the ids whose claim still held. */
  renew(claimed: readonly ClaimedJob[], lockedUntil: Date): Promise<Set<number>>;
  /** Ends every claim at once (only for a process that alone has the database open). */
  releaseAllClaims(now: Date): Promise<number>;
  /** Stores jobs outside any state change, in one statement; their ids in the order given. */
  insertMany(newJobs: readonly NewJob[], now: Date): Promise<number[]>;
  /** Deletes a job nobody has started; false once a worker claimed it (or it is gone). */
  withdraw(id: number): Promise<boolean>;
  /** Of these jobs, the ids still queued or running. */
  unfinished(ids: readonly number[]): Promise<Set<number>>;
}

/** Callback endpoints retired by their receiver (`410 Gone`), per agent. */
export interface CallbackStore {
  isDisabled(agentId: string, url: string): Promise<boolean>;
  /** Records the retirement and its audit event together; a repeat changes nothing. */
  disable(agent: { id: string; name: string }, url: string, proposalId: string, at: Date): Promise<void>;
}
