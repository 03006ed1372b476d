/**
 * When a click's checks and its decision run. Responses come first: they have Discord's 3 seconds, a
 * decision has none, and both share one event loop and (on PGlite) one database queue.
 */

import { settleWithin, type Settled } from '../lib/timeouts.js';
import { createWorkQueue } from '../lib/work-queue.js';

/**
 * A burst of clicks is over once none has arrived for this long. Long enough that a loaded machine
 * reading a burst slowly does not see lulls inside it; short enough that a lone click's decision
 * (and its message edit) follows within a fraction of a second.
 */
export const DEFAULT_BURST_GAP_MS = 250;

/** Starts `work` the first time it is called; later calls get the same promise. */
export function startedOnce<T>(work: () => Promise<T>): () => Promise<T> {
  let started: Promise<T> | undefined;
  return () => (started ??= work());
}

/** `budgetMs` > 0 waits that long for the work; 0 (a burst) does not start it before the answer. */
export function settleInBudget<T>(work: () => Promise<T>, budgetMs: number): Promise<Settled<T>> {
  return budgetMs > 0 ? settleWithin(work(), budgetMs) : Promise.resolve({ settled: false });
}

/**
 * A bounded set of the interaction ids seen lately, oldest evicted first. Discord does not resend an
 * interaction, but a proxy, a retried HTTP delivery or a gateway replay might; the core is idempotent
 * anyway (row lock + unique approval), this only saves the work. In memory and per process: ids that
 * reach two replicas are handled by the core's idempotency.
 */
export class RecentIds {
  private readonly ids = new Set<string>();
  constructor(private readonly capacity: number) {}

  /** True the first time an id is offered. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.capacity) {
      const oldest = this.ids.values().next();
      if (!oldest.done) this.ids.delete(oldest.value);
    }
    return true;
  }
}

export interface BurstSchedulerOptions {
  /** Clicks closer together than this (or arriving while another is being answered) form a burst. */
  burstGapMs: number;
  /** Decisions running at once after their responses. */
  workConcurrency: number;
  /** Longest a decision waits for a lull in clicks before it runs anyway. */
  maxDecisionDelayMs: number;
  onWorkError(error: unknown): void;
}

/**
 * During a burst of clicks decisions wait, and only one runs at a time once the oldest has waited
 * `maxDecisionDelayMs`, so a steady stream of clicks cannot starve them; when quiet, up to
 * `workConcurrency` run.
 */
export function createBurstScheduler(options: BurstSchedulerOptions) {
  const { burstGapMs, workConcurrency, maxDecisionDelayMs } = options;
  /** Interactions being checked before their response; with `lastClickAt`, tells a burst from a lull. */
  let answering = 0;
  let lastClickAt = 0;

  /** No click is being answered and none arrived in the last `burstGapMs`: not in a burst. */
  function isQuiet(now: number): boolean {
    return answering === 0 && now - lastClickAt >= burstGapMs;
  }

  const decisions = createWorkQueue({
    concurrency: workConcurrency,
    admit: ({ running, oldestQueuedAt }) => {
      const now = Date.now();
      return isQuiet(now) || (running === 0 && now - oldestQueuedAt >= maxDecisionDelayMs);
    },
    // Look again once the burst could be over or the oldest decision has waited long enough.
    recheckMs: Math.min(burstGapMs, maxDecisionDelayMs),
  });

  /** Answers one interaction, told whether it arrived in a quiet moment (not part of a burst). */
  async function whileAnswering<T>(answer: (quiet: boolean) => Promise<T>): Promise<T> {
    const now = Date.now();
    const quiet = isQuiet(now);
    answering += 1;
    lastClickAt = now;
    try {
      return await answer(quiet);
    } finally {
      answering -= 1;
      decisions.poke();
    }
  }

  /** Queues work to run after a response (at most `workConcurrency` at once), tracked for drain(). */
  function runAfter(work: () => Promise<void>): void {
    // Nobody awaits a decision made after its response: its failure is reported, not thrown.
    decisions.run(work).catch(options.onWorkError);
  }

  /** Resolves once every queued and running piece of work has finished. */
  const drain = (): Promise<void> => decisions.drain();

  return { whileAnswering, runAfter, drain };
}
