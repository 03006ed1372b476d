import type { Logger } from 'pino';
import { DeliveryError } from '../chat/types.js';
import type { JobRow, JobStore } from '../db/jobs-store.js';
import { scrubSecrets } from '../runtime/logger.js';

export type JobHandler = (payload: Record<string, unknown>) => Promise<void>;

export interface OutboxWorkerOptions {
  jobs: JobStore;
  handlers: Record<string, JobHandler>;
  logger: Logger;
  clock?: () => Date;
  pollIntervalMs?: number;
  batchSize?: number;
  /** How long a claimed job is ours; a worker that dies frees its jobs when this runs out. */
  leaseMs?: number;
  backoff?: { baseMs: number; maxMs: number };
  random?: () => number;
  onSettled?(job: JobRow, outcome: 'done' | 'retry' | 'dead'): void;
}

/** Exponential backoff with jitter: a fleet of retries spreads out instead of arriving together. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * Runs the outbox: claims due jobs, runs their handler, and records the outcome — done, retried
 * later (honouring a platform's Retry-After), or dead after its last attempt (kept for
 * `twokey jobs list|retry`). Every replica runs one; the claim keeps each job to one worker.
 */
export function createOutboxWorker(options: OutboxWorkerOptions) {
  const clock = options.clock ?? (() => new Date());
  const pollIntervalMs = options.pollIntervalMs ?? 250;
  // Longer than any handler's own timeout (callbacks 10 s, chat calls 15 s).
  const leaseMs = options.leaseMs ?? 30_000;
  const backoff = options.backoff ?? { baseMs: 1_000, maxMs: 5 * 60_000 };
  const random = options.random ?? Math.random;
  let running = false;
  let timer: NodeJS.Timeout | null = null;
  let wakeRequested = false;
  let inFlight: Promise<number> | null = null;

  async function runJob(job: JobRow): Promise<void> {
    const handler = options.handlers[job.kind];
    try {
      if (!handler) throw new DeliveryError(`no handler for job kind "${job.kind}"`, { permanent: true });
      await handler(job.payload);
      await options.jobs.complete(job.id, clock());
      options.onSettled?.(job, 'done');
    } catch (error) {
      const message = scrubSecrets(error instanceof Error ? error.message : String(error)).slice(0, 1000);
      const delivery = error instanceof DeliveryError ? error.options : {};
      if (delivery.permanent || job.attempts >= job.maxAttempts) {
        await options.jobs.bury(job.id, message, clock());
        options.logger.error({ jobId: job.id, kind: job.kind, attempts: job.attempts, error: message }, 'outbox job is dead');
        options.onSettled?.(job, 'dead');
        return;
      }
      // Retry-After is the least we wait; our own backoff still applies, so "0" cannot make us hammer.
      const delay = Math.max(delivery.retryAfterMs ?? 0, backoffDelay(job.attempts, backoff.baseMs, backoff.maxMs, random));
      await options.jobs.reschedule(job.id, new Date(clock().getTime() + delay), message, clock());
      options.logger.warn({ jobId: job.id, kind: job.kind, attempts: job.attempts, retryInMs: delay, error: message }, 'outbox job failed; will retry');
      options.onSettled?.(job, 'retry');
    }
  }

  /** Claims and runs one batch; resolves with how many jobs ran. */
  async function runOnce(): Promise<number> {
    const claimed = await options.jobs.claimDue(clock(), options.batchSize ?? 10, leaseMs);
    await Promise.all(claimed.map(runJob));
    return claimed.length;
  }

  function schedule(delayMs: number) {
    if (!running) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(tick, delayMs);
  }

  function tick() {
    timer = null;
    if (!running || inFlight) return;
    wakeRequested = false;
    inFlight = runOnce().catch((error: unknown) => {
      // The database may be down for a while; keep polling, the jobs are safe in it.
      options.logger.warn({ err: error }, 'outbox poll failed');
      return 0;
    });
    void inFlight.then((ran) => {
      inFlight = null;
      // A full batch or a wake-up during the run means there may be more right now.
      schedule(ran > 0 || wakeRequested ? 0 : pollIntervalMs);
    });
  }

  return {
    runOnce,
    start() {
      running = true;
      schedule(0);
    },
    /** Something was just queued: look now instead of at the next poll. */
    wake() {
      wakeRequested = true;
      if (running && !inFlight) schedule(0);
    },
    /** Stops claiming and waits for the jobs in hand to finish (graceful shutdown). */
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      timer = null;
      await inFlight;
    },
  };
}

export type OutboxWorker = ReturnType<typeof createOutboxWorker>;
