export interface WorkQueueOptions {
  /** Most tasks running at once. */
  concurrency: number;
  /**
   * Whether the oldest waiting task may start now, below `concurrency` (default: always). A queue
   * that refuses asks again after `recheckMs`, when a task ends, on `poke()`, and never while draining.
   */
  admit?: (state: { running: number; oldestQueuedAt: number }) => boolean;
  /** How soon a refused task is offered to `admit` again; at least 10 ms, so 0 does not spin. */
  recheckMs?: number;
  /** Milliseconds for `oldestQueuedAt`; Date.now by default. */
  now?: () => number;
}

/**
 * Runs tasks a few at a time, each on a fresh turn of the event loop (setImmediate), so I/O already
 * waiting (the next requests to answer) goes first. Work that follows an answer — a click's decision
 * after Slack's or Discord's 3 s acknowledgement — is bounded this way: unbounded, a burst of clicks
 * starts as many decisions, whose database work delays every later acknowledgement.
 */
export function createWorkQueue(options: WorkQueueOptions) {
  const now = options.now ?? Date.now;
  const recheckMs = Math.max(10, options.recheckMs ?? 10);
  const waiting: Array<{ start: () => void; queuedAt: number }> = [];
  const unsettled = new Set<Promise<unknown>>();
  let running = 0;
  let draining = 0;
  let pumpScheduled = false;
  let recheck: NodeJS.Timeout | null = null;

  /** Starts what may start; with `admit`, looks again later while something is held back. */
  function pump(): void {
    while (waiting.length > 0 && running < options.concurrency) {
      const [oldest] = waiting;
      if (!oldest) break;
      if (draining === 0 && options.admit && !options.admit({ running, oldestQueuedAt: oldest.queuedAt })) break;
      waiting.shift();
      oldest.start();
    }
    if (options.admit && waiting.length > 0 && running < options.concurrency && !recheck) {
      recheck = setTimeout(() => {
        recheck = null;
        pump();
      }, recheckMs);
      recheck.unref();
    }
  }

  function schedulePump(): void {
    if (pumpScheduled) return;
    pumpScheduled = true;
    setImmediate(() => {
      pumpScheduled = false;
      pump();
    });
  }

  function run<T>(task: () => Promise<T>): Promise<T> {
    const result = new Promise<T>((resolve, reject) => {
      const start = () => {
        running += 1;
        task()
          .then(resolve, reject)
          .finally(() => {
            running -= 1;
            schedulePump();
          });
      };
      waiting.push({ start, queuedAt: now() });
    });
    schedulePump();
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    unsettled.add(settled);
    void settled.then(() => unsettled.delete(settled));
    return result;
  }

  /**
   * Resolves once every task queued so far, and any queued while waiting, has run; or after
   * `timeoutMs` when given. Meanwhile `admit` is not asked: shutting down, nothing is worth holding.
   */
  async function drain(timeoutMs?: number): Promise<void> {
    draining += 1;
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const deadline =
      timeoutMs === undefined
        ? null
        : new Promise<void>((resolve) => {
            timer = setTimeout(() => {
              timedOut = true;
              resolve();
            }, timeoutMs);
            timer.unref();
          });
    try {
      pump();
      while (unsettled.size > 0 && !timedOut) {
        const everything = Promise.all([...unsettled]).then(() => undefined);
        await (deadline ? Promise.race([everything, deadline]) : everything);
      }
    } finally {
      clearTimeout(timer);
      draining -= 1;
    }
  }

  return {
    run,
    drain,
    /** Asks `admit` again now (its answer depends on something that just changed). */
    poke: pump,
    /** Tasks running or waiting. */
    get pending() {
      return running + waiting.length;
    },
  };
}

export type WorkQueue = ReturnType<typeof createWorkQueue>;
