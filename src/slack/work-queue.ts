/**
 * Runs the work clicks start after their ack, a few at a time. Slack's 3 s window covers the ack,
 * not the decision; but on the embedded database every decision is CPU work on the event loop that
 * also reads and answers the next clicks. Unbounded, a burst of 100 clicks starts 100 decisions that
 * delay every later ack by seconds; queued, each ack goes out first. Tasks also start on a fresh
 * turn of the event loop (setImmediate), so pending network reads come first.
 */
export function createWorkQueue(concurrency: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  const unsettled = new Set<Promise<unknown>>();

  function next() {
    active -= 1;
    waiting.shift()?.();
  }

  function run<T>(task: () => Promise<T>): Promise<T> {
    const result = new Promise<T>((resolve, reject) => {
      const start = () => {
        active += 1;
        setImmediate(() => {
          task().then(resolve, reject).finally(next);
        });
      };
      if (active < concurrency) start();
      else waiting.push(start);
    });
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    unsettled.add(settled);
    void settled.then(() => unsettled.delete(settled));
    return result;
  }

  /** Resolves when everything queued so far has run, or after `timeoutMs`. */
  async function drain(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    });
    await Promise.race([Promise.all([...unsettled]), deadline]);
    clearTimeout(timer);
  }

  return { run, drain, get pending() {
    return active + waiting.length;
  } };
}

export type WorkQueue = ReturnType<typeof createWorkQueue>;
