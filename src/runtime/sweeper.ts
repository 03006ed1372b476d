import type { Logger } from 'pino';
import type { PruneCounts } from '../db/retention.js';

export interface SweeperOptions {
  clock: () => Date;
  logger: Logger;
  /** Only the elected replica sweeps. */
  isLeader(): boolean;
  /** Work due on every tick (expiry, execution recovery); each task's failure is logged on its own. */
  tasks: Record<string, () => Promise<unknown>>;
  /** Deletes one bounded batch of every kind of expired row. */
  prune(now: Date): Promise<PruneCounts>;
  pruneBatchSize: number;
  /** How often pruning runs, by the injected clock; a batch that came back full runs again next tick. */
  pruneEveryMs: number;
}

/**
 * The elected replica's periodic work. A failing task is logged, never swallowed: an expiry sweep
 * that fails every second for an hour is an outage someone must see.
 */
export function createSweeper(options: SweeperOptions) {
  let lastPruneAt = Number.NEGATIVE_INFINITY;
  let backlog = false;
  let sweeping: Promise<boolean> | null = null;

  async function prune(): Promise<void> {
    const now = options.clock();
    if (!backlog && now.getTime() - lastPruneAt < options.pruneEveryMs) return;
    lastPruneAt = now.getTime();
    const counts = await options.prune(now);
    backlog = Object.values(counts).some((count) => count >= options.pruneBatchSize);
    const total = Object.values(counts).reduce((sum, count) => sum + count, 0);
    if (total > 0) options.logger.info({ pruned: counts }, 'pruned expired rows');
  }

  async function run(): Promise<boolean> {
    const tasks: Array<[string, () => Promise<unknown>]> = [...Object.entries(options.tasks), ['prune', prune]];
    await Promise.all(
      tasks.map(([name, task]) =>
        task().catch((error: unknown) => {
          options.logger.error({ err: error, task: name }, `sweeper task "${name}" failed`);
        }),
      ),
    );
    return true;
  }

  return {
    /** One sweep, if this replica leads and none is running; answers whether it swept. */
    tick(): Promise<boolean> {
      if (sweeping || !options.isLeader()) return Promise.resolve(false);
      sweeping = run().finally(() => (sweeping = null));
      return sweeping;
    },
    /** Waits for a sweep under way (shutdown). */
    async idle(): Promise<void> {
      await sweeping;
    },
  };
}

export type Sweeper = ReturnType<typeof createSweeper>;
