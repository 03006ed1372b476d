/**
 * When a click's checks run. Responses come first: they have Discord's 3 seconds, and on PGlite a
 * check holds the one database queue the clicks' writes wait in.
 */

import { settleWithin, type Settled } from '../lib/timeouts.js';

/**
 * A burst of clicks is over once none has arrived for this long. Long enough that a loaded machine
 * reading a burst slowly does not see lulls inside it; short enough that the next lone click is
 * checked before its answer again, so a refusal is that answer.
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

/**
 * Tells a burst of clicks from a lone one. A lone click waits (briefly) for its checks, so a refusal
 * can be its answer; in a burst each would wait behind the others' checks, so every click is stored
 * and answered at once, and the core's checks come when the outbox decides it.
 */
export function createBurstScheduler(options: { burstGapMs: number }) {
  const { burstGapMs } = options;
  /** Interactions being checked before their response; with `lastClickAt`, tells a burst from a lull. */
  let answering = 0;
  let lastClickAt = 0;

  /** Answers one interaction, told whether it arrived in a quiet moment (not part of a burst). */
  async function whileAnswering<T>(answer: (quiet: boolean) => Promise<T>): Promise<T> {
    const now = Date.now();
    const quiet = answering === 0 && now - lastClickAt >= burstGapMs;
    answering += 1;
    lastClickAt = now;
    try {
      return await answer(quiet);
    } finally {
      answering -= 1;
    }
  }

  return { whileAnswering };
}
