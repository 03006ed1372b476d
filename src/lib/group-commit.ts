import { isDatabaseUnavailable } from './driver-errors.js';

/**
 * Group commit: single writes that arrive while one is on its way to the database go together in the
 * next statement, as a database groups the flushes of concurrent commits. One batch is in flight at
 * a time, so nothing waits while the database is idle (a lone write goes at once, as itself), and
 * under load each round trip carries every write that queued meanwhile: the per-statement costs (the
 * socket write and wake-up, parse and plan, a commit's flush) are paid once per batch, not per write.
 *
 * A batch the database refused says nothing of which write in it was at fault, so each is then sent
 * on its own: one bad write fails alone. A batch whose fate is unknown (the connection broke before
 * the answer: it may have committed) fails every write in it, as a lone statement would have: sent
 * again, rows it did write would be written twice.
 *
 * Hand-written because the libraries that batch (DataLoader) gather per event-loop tick, not while a
 * round trip is in flight, and know nothing of writes that must not share a statement.
 */

export interface GroupCommitOptions<Item, Result> {
  /** Several writes in one statement: one result per item, in order. */
  runBatch(items: readonly Item[]): Promise<Result[]>;
  /** One write as itself: a lone write, and each write of a batch the database refused. */
  runOne(item: Item): Promise<Result>;
  /** The most writes one statement carries. */
  maxBatch: number;
  /**
   * Whether a batch that failed with `error` surely wrote nothing, so its writes may be sent again one
   * by one. By default, any error but the database's being out of reach (`isDatabaseUnavailable`): a
   * statement the database answered with an error wrote nothing, while one whose connection broke
   * before the answer may have committed.
   */
  refusedWhole?(error: unknown): boolean;
  /**
   * Writes with the same key never share a statement (one row cannot be changed twice by one
   * INSERT … ON CONFLICT): the later waits for the next batch, in its turn.
   */
  keyOf?(item: Item): string;
}

interface Pending<Item, Result> {
  item: Item;
  resolve(result: Result): void;
  reject(error: unknown): void;
}

export function createGroupCommit<Item, Result>(options: GroupCommitOptions<Item, Result>): (item: Item) => Promise<Result> {
  const { runBatch, runOne, maxBatch, keyOf, refusedWhole = (error: unknown) => !isDatabaseUnavailable(error) } = options;
  type Queued = Pending<Item, Result>;
  const queue: Queued[] = [];
  let flushing = false;

  /** The next batch, in arrival order: up to maxBatch writes, none sharing a key with an earlier one. */
  function takeBatch(): Queued[] {
    if (!keyOf) return queue.splice(0, maxBatch);
    const batch: Queued[] = [];
    const keys = new Set<string>();
    for (let index = 0; index < queue.length && batch.length < maxBatch;) {
      const key = keyOf((queue[index] as Queued).item);
      if (keys.has(key)) {
        index += 1;
        continue;
      }
      keys.add(key);
      batch.push(...queue.splice(index, 1));
    }
    return batch;
  }

  async function send(batch: Queued[]): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch as [Queued];
      await runOne(only.item).then(only.resolve, only.reject);
      return;
    }
    let results: Result[];
    try {
      results = await runBatch(batch.map((pending) => pending.item));
    } catch (error) {
      if (refusedWhole(error)) await Promise.all(batch.map((pending) => runOne(pending.item).then(pending.resolve, pending.reject)));
      else for (const pending of batch) pending.reject(error);
      return;
    }
    batch.forEach((pending, index) => pending.resolve(results[index] as Result));
  }

  async function flush(): Promise<void> {
    flushing = true;
    try {
      while (queue.length > 0) await send(takeBatch());
    } finally {
      flushing = false;
    }
  }

  return (item) =>
    new Promise<Result>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (!flushing) void flush();
    });
}
