import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { DeliveryError } from '../lib/delivery-error.js';
import { isDatabaseUnavailable, plainReason } from '../lib/driver-errors.js';
import { createGroupCommit } from '../lib/group-commit.js';
import type { JobRow, JobSlot, JobStore } from './ports.js';
import {
  addWakeUp,
  claimForLane,
  countRunning,
  dropWakeUpOf,
  dropWakeUpsDue,
  nextWakeUpAt,
  createLeaseRenewal,
  defaultLanes,
  freeSlots,
  lendSlot,
  newLaneState,
  payloadKey,
  uncountRunning,
  type LaneState,
  type OutboxLane,
} from './lanes.js';
import { scrubSecrets } from '../lib/secrets.js';
import { withDeadline } from '../lib/timeouts.js';
import { boundHandler, type JobCompletion, type JobContext, type JobHandlers, type LastWrite } from '../core/jobs.js';
import { isJobKind, parseJob } from '../platforms/jobs.js';

export type { JobContext, JobHandler, JobHandlers } from '../core/jobs.js';
export { defaultLanes, laneOf, type OutboxLane } from './lanes.js';

export type JobOutcome = 'done' | 'retry' | 'dead' | 'superseded';

export interface OutboxWorkerOptions {
  jobs: JobStore;
  /**
   * The handler of each job kind, typed by the job catalogue (src/core/jobs.ts); a kind without one
   * is buried. Each payload is parsed with its kind's schema before its handler sees it.
   */
  handlers: Partial<JobHandlers>;
  logger: Logger;
  clock?: () => Date;
  pollIntervalMs?: number;
  lanes?: readonly OutboxLane[];
  /** How long a claimed job is ours; a worker that dies frees its jobs when this runs out. */
  leaseMs?: number;
  /** How long one run of a handler may take; well inside the lease, so a live job is never re-claimed. */
  handlerDeadlineMs?: number;
  backoff?: { baseMs: number; maxMs: number };
  random?: () => number;
  /** Names this worker's claims; random per worker by default. */
  workerId?: string;
  onSettled?(job: JobRow, outcome: JobOutcome): void;
}

/** Exponential backoff with jitter: a fleet of retries spreads out instead of arriving together. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

const DEFAULT_LEASE_MS = 60_000;
const DEFAULT_DEADLINE_MS = 30_000;

/**
 * Completions go out together (src/lib/group-commit.ts): while one statement is on its way, the
 * jobs that finish meanwhile wait and go in the next, each still fenced by its own claim stamp.
 * `held` false: another worker re-claimed the job after this one's lease ran out. `followed`: a job
 * of its ordering key waits behind it.
 */
function createCompletionBatcher(jobs: JobStore, clock: () => Date) {
  const completionOf = (held: Map<number, { followed: boolean }>, job: JobRow): JobCompletion => {
    const completed = held.get(job.id);
    return { held: completed !== undefined, followed: completed?.followed ?? false };
  };
  const complete = createGroupCommit<JobRow, JobCompletion>({
    runBatch: async (batch) => {
      const held = await jobs.completeAll(batch, clock());
      return batch.map((job) => completionOf(held, job));
    },
    runOne: async (job) => completionOf(await jobs.completeAll([job], clock()), job),
    // As many as finish together: the lanes' sizes bound them.
    maxBatch: 1_000,
    // A failed completion fails every job of its batch; the caller offers each again (`record`),
    // fenced by its claim stamp, so a batch that did commit changes nothing the second time.
    refusedWhole: () => false,
  });
  return { complete };
}

/** How often an outcome the database could not take is offered again. */
const RECORD_RETRY_MS = 250;

/** Runs one claimed job and records its outcome, each outcome fenced by the job's claim stamp. */
function createJobRunner(
  options: OutboxWorkerOptions,
  settings: {
    clock: () => Date;
    leaseMs: number;
    backoff: { baseMs: number; maxMs: number };
    random: () => number;
    stopping: () => boolean;
  },
) {
  const { clock, backoff, random } = settings;
  const completions = createCompletionBatcher(options.jobs, clock);

  /**
   * Writes an outcome, again and again while the database cannot be reached: a job that was done
   * when the database went away is recorded once it is back, instead of waiting out its lease and
   * running a second time. Bounded by the lease (after it the fenced write changes nothing anyway)
   * and by shutdown.
   */
  async function record<T>(write: () => Promise<T>): Promise<T> {
    const giveUpAt = Date.now() + settings.leaseMs;
    for (;;) {
      try {
        return await write();
      } catch (error) {
        if (!isDatabaseUnavailable(error) || settings.stopping() || Date.now() + RECORD_RETRY_MS > giveUpAt) throw error;
        await new Promise((retry) => setTimeout(retry, RECORD_RETRY_MS));
      }
    }
  }

  function runWithDeadline(
    run: (context: JobContext) => Promise<LastWrite | void>,
    job: JobRow,
    handlerDeadlineMs: number,
    known: unknown,
  ): Promise<LastWrite | void> {
    // `known` was typed by its kind where the job was queued (`OutboxJobSpec.firstOfItsKey`), and
    // handed here with that job only.
    const given = known === undefined ? {} : { known: known as JobContext['known'] };
    return withDeadline(
      handlerDeadlineMs,
      (signal) => run({ signal, attempt: job.attempts, jobId: job.id, claim: { id: job.id, lockedBy: job.lockedBy }, ...given }),
      () => new DeliveryError(`no answer within ${handlerDeadlineMs} ms`),
    );
  }

  /**
   * The job's handler bound to its parsed payload. A kind without a handler, or a stored payload that
   * does not fit its kind's schema (written by hand, or by a version that wrote another shape), is
   * refused for good: it is buried with the reason, never run.
   */
  function handlerOf(job: JobRow): (context: JobContext) => Promise<LastWrite | void> {
    // Built only when thrown: an error captures a stack, and every job passes here.
    const noHandler = () => new DeliveryError(`no handler for job kind "${job.kind}"`, { permanent: true });
    if (!isJobKind(job.kind) || !options.handlers[job.kind]) throw noHandler();
    const parsed = parseJob(job.kind, job.payload);
    if ('problem' in parsed) throw new DeliveryError(parsed.problem, { permanent: true });
    const run = boundHandler(options.handlers, parsed.job);
    if (!run) throw noHandler();
    return run;
  }

  function superseded(job: JobRow): undefined {
    options.logger.warn(
      { jobId: job.id, kind: job.kind, attempts: job.attempts },
      // Or: the decision the job made completed it (a stored click), and what failed came after.
      'outbox job is no longer held by this worker (re-claimed after its lease ran out, or completed by the decision it made); this outcome is dropped',
    );
    options.onSettled?.(job, 'superseded');
    return undefined;
  }

  /**
   * Records a run that succeeded: its last write and completion in one statement, or the completion
   * alone (joined with others that finish meanwhile). The one statement is atomic, so when the
   * database refuses it (not: cannot be reached) neither landed, and the run failed: `failed`.
   */
  async function completeRun(job: JobRow, lastWrite: LastWrite | void): Promise<JobCompletion | { failed: unknown }> {
    if (!lastWrite) return record(() => completions.complete(job));
    try {
      return await record(() => lastWrite.completing(job, clock()));
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw error;
      return { failed: error };
    }
  }

  /**
   * Resolves with what the lane should do next: look again when a job put back for a retry falls due
   * (`retryInMs`), or at once when a job of the same ordering key can run now (`followed`).
   */
  return async function runJob(job: JobRow, handlerDeadlineMs: number, known?: unknown): Promise<{ retryInMs?: number; followed?: boolean } | undefined> {
    let failure: { error: unknown } | null = null;
    let lastWrite: LastWrite | void = undefined;
    try {
      lastWrite = await runWithDeadline(handlerOf(job), job, handlerDeadlineMs, known);
    } catch (error) {
      failure = { error };
    }
    if (!failure) {
      // An outcome that cannot be recorded throws from here: the job's lease brings it back.
      const completion = await completeRun(job, lastWrite);
      if ('failed' in completion) failure = { error: completion.failed };
      else if (!completion.held) return superseded(job);
      else {
        options.onSettled?.(job, 'done');
        return { followed: completion.followed };
      }
    }
    const { error } = failure;
    const message = scrubSecrets(plainReason(error)).slice(0, 1000);
    const delivery = error instanceof DeliveryError ? error.options : {};
    if (delivery.permanent || job.attempts >= job.maxAttempts) {
      if (!(await record(() => options.jobs.bury(job, message, clock())))) return superseded(job);
      options.logger.error({ jobId: job.id, kind: job.kind, attempts: job.attempts, error: message }, 'outbox job is dead');
      options.onSettled?.(job, 'dead');
      // Buried, it no longer holds back the jobs of its ordering key.
      return { followed: job.orderingKey !== null };
    }
    // Retry-After is the least we wait; our own backoff still applies, so "0" cannot make us hammer.
    const delay = Math.max(delivery.retryAfterMs ?? 0, backoffDelay(job.attempts, backoff.baseMs, backoff.maxMs, random));
    const now = clock();
    if (!(await record(() => options.jobs.reschedule(job, new Date(now.getTime() + delay), message, now)))) return superseded(job);
    options.logger.warn({ jobId: job.id, kind: job.kind, attempts: job.attempts, retryInMs: delay, error: message }, 'outbox job failed; will retry');
    options.onSettled?.(job, 'retry');
    return { retryInMs: delay };
  };
}

/**
 * Runs the outbox: claims due jobs, runs their handler, and records the outcome — done, retried
 * later (honouring a platform's Retry-After), or dead after its last attempt (kept for
 * `twokey jobs list|retry`). Every replica runs one; the claim keeps each job to one worker.
 *
 * Each lane refills a slot as soon as a job in it settles (no batch waits for its slowest job), and
 * every outcome is fenced by the claim's stamp: a worker that outlived its lease changes nothing.
 */
export function createOutboxWorker(options: OutboxWorkerOptions) {
  const clock = options.clock ?? (() => new Date());
  const pollIntervalMs = options.pollIntervalMs ?? 250;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const handlerDeadlineMs = options.handlerDeadlineMs ?? Math.min(DEFAULT_DEADLINE_MS, Math.floor(leaseMs / 2));
  if (handlerDeadlineMs >= leaseMs) {
    throw new Error(`the outbox lease (${leaseMs} ms) must be longer than the handler deadline (${handlerDeadlineMs} ms)`);
  }
  const backoff = options.backoff ?? { baseMs: 1_000, maxMs: 5 * 60_000 };
  const random = options.random ?? Math.random;
  const workerId = options.workerId ?? `w_${randomBytes(6).toString('hex')}`;
  const lanes = options.lanes ?? defaultLanes();
  const namedKinds = lanes.flatMap((lane) => lane.kinds ?? []);
  const states = lanes.map((lane) => newLaneState(lane, namedKinds, leaseMs, handlerDeadlineMs));
  const runsKind = (state: LaneState, kind: string) => (state.lane.kinds ? state.lane.kinds.includes(kind) : !namedKinds.includes(kind));
  let running = false;
  /** Set by stop(): an outcome waiting for the database is given up (its lease brings the job back). */
  let stopped = false;

  const runJob = createJobRunner(options, { clock, leaseMs, backoff, random, stopping: () => stopped });
  const renewal = createLeaseRenewal(options, clock);

  /** Starts a claimed job in its lane's slot; when it settles the slot is refilled at once. */
  function launch(state: LaneState, job: JobRow, refill: boolean, known?: unknown): Promise<void> {
    const destination = payloadKey(job, 'destination');
    const agent = payloadKey(job, 'agentId');
    countRunning(state.perDestination, destination);
    countRunning(state.perAgent, agent);
    const capped = Boolean((destination && state.lane.perDestination) || (agent && state.lane.perAgent));
    state.held.set(job.id, job);
    renewal.keepRenewing(state);
    let followed = false;
    const run = runJob(job, state.handlerDeadlineMs, known)
      .then((next) => {
        followed = next?.followed ?? false;
        // Put back for a retry: look again when it falls due rather than at the next poll.
        if (next?.retryInMs !== undefined && refill) wakeIn(state, next.retryInMs);
      })
      .catch((error: unknown) => {
        // The outcome could not be written (database down): the lease runs out and the job runs again.
        options.logger.warn({ err: error, jobId: job.id, kind: job.kind }, 'outbox job outcome not recorded');
      })
      .finally(() => {
        state.running.delete(run);
        state.held.delete(job.id);
        uncountRunning(state.perDestination, destination);
        uncountRunning(state.perAgent, agent);
        // A settled job frees a slot, but claiming for it is worth a statement only when jobs may be
        // waiting: the last claim was full, something was queued since, a destination or agent
        // cap held some back, or a job of this one's ordering key waits behind it (every claim
        // while this one ran skipped it). Otherwise the next wake or poll finds new work.
        if (refill && (state.moreMayBeDue || state.wakeRequested || capped || followed)) pump(state);
      });
    state.running.add(run);
    return run;
  }

  const claimFor = (state: LaneState): Promise<JobRow[]> => claimForLane(options.jobs, state, workerId, clock());

  function schedule(state: LaneState, delayMs: number) {
    if (!running) return;
    if (state.timer) clearTimeout(state.timer);
    // A job this lane knows of falls due before the next poll: the timer is for it.
    const nextDueAt = nextWakeUpAt(state);
    if (nextDueAt !== undefined) delayMs = Math.min(delayMs, Math.max(0, nextDueAt - Date.now()));
    state.timerDueAt = Date.now() + delayMs;
    state.timer = setTimeout(() => {
      state.timer = null;
      pump(state);
    }, delayMs);
  }

  /** A job of this lane (of ordering key `key`) falls due in `delayMs`: the lane looks then, or at its next poll if sooner. */
  function wakeIn(state: LaneState, delayMs: number, key: string | null = null) {
    const dueAt = Date.now() + delayMs;
    // A claim under way schedules the next look when it ends; a timer due sooner stays.
    if (addWakeUp(state, { at: dueAt, key }) && !state.claiming && (!state.timer || state.timerDueAt > dueAt)) schedule(state, pollIntervalMs);
  }

  /** Fills the lane's free slots; one claim per lane at a time. */
  function pump(state: LaneState) {
    if (!running || state.claiming) return;
    const free = freeSlots(state);
    if (free <= 0) return; // a settling job, or a held slot given back, calls pump again
    if (state.lane.admit && !state.lane.admit({ running: state.running.size })) {
      schedule(state, state.lane.admitRecheckMs ?? 25);
      return;
    }
    state.wakeRequested = false;
    // Jobs this lane knows of that are due by now are among what this claim finds.
    dropWakeUpsDue(state, Date.now());
    state.claiming = claimFor(state)
      .then((claimed) => {
        state.moreMayBeDue = claimed.length === free;
        for (const job of claimed) void launch(state, job, true);
        return state.moreMayBeDue || state.wakeRequested ? 0 : pollIntervalMs;
      })
      .catch((error: unknown) => {
        // The database may be down for a while; keep polling, the jobs are safe in it.
        options.logger.warn({ err: error, lane: state.lane.name }, 'outbox poll failed');
        return pollIntervalMs;
      })
      .then((next) => {
        state.claiming = null;
        schedule(state, next);
      });
  }

  /**
   * A job this lane had a timed wake-up for was claimed here sooner (a twin taken over by a result's
   * statement): the wake-up is dropped, and the lane's timer, if it was set for it, set for the next
   * one or the poll, rather than firing a claim that would find nothing.
   */
  function forgetWakeUp(state: LaneState, key: string | null) {
    const forgotten = dropWakeUpOf(state, key);
    // A timer due sooner than it (a wake-up requested now) was not set for it, and stays.
    if (forgotten && state.timer && !state.claiming && state.timerDueAt >= forgotten.at) schedule(state, pollIntervalMs);
  }

  /**
   * A slot for a job of `kind` that a transaction's statement claims for this process (inserted
   * claimed, or a twin taken over: src/outbox/README.md), if a lane here lends one (`lendSlot`).
   */
  function takeJob(kind: string): JobSlot | null {
    const lane = {
      running: () => running,
      launch: (state: LaneState, job: JobRow, known: unknown) => {
        forgetWakeUp(state, job.orderingKey);
        void launch(state, job, true, known);
      },
      pump,
    };
    return lendSlot(
      states.find((state) => runsKind(state, kind)),
      workerId,
      lane,
    );
  }

  return {
    workerId,
    takeJob,
    /** Claims what each lane has room for and waits for those jobs (tests, one-shot runs); how many ran. */
    async runOnce(): Promise<number> {
      let ran = 0;
      for (const state of states) {
        const claimed = await claimFor(state);
        ran += claimed.length;
        await Promise.all(claimed.map((job) => launch(state, job, false)));
      }
      return ran;
    },
    start() {
      running = true;
      for (const state of states) schedule(state, 0);
    },
    /**
     * Something was queued (of these kinds, when known): look now, or when a job due in `inMs` (of
     * ordering key `key`) falls due, not at the next poll.
     */
    wake(kinds?: readonly string[], inMs = 0, key: string | null = null) {
      for (const state of states) {
        if (kinds && !kinds.some((kind) => runsKind(state, kind))) continue;
        if (inMs > 0) {
          if (running && inMs < pollIntervalMs) wakeIn(state, inMs, key);
          continue;
        }
        state.wakeRequested = true;
        if (running && !state.claiming) schedule(state, 0);
      }
    },
    /** Stops claiming and waits for the jobs in hand to finish (graceful shutdown). */
    async stop() {
      running = false;
      stopped = true;
      for (const state of states) {
        if (state.timer) clearTimeout(state.timer);
        state.timer = null;
      }
      await Promise.all(states.map((state) => state.claiming));
      await Promise.all(states.flatMap((state) => [...state.running]));
      for (const state of states) renewal.stop(state);
    },
  };
}

export type OutboxWorker = ReturnType<typeof createOutboxWorker>;
