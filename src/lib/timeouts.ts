export type Settled<T> = { settled: true; value: T } | { settled: false };

export interface TimerOptions {
  /** Let the process exit while only this timer is pending (background waits, not request work). */
  unref?: boolean;
}

function startTimer(ms: number, fire: () => void, options: TimerOptions): NodeJS.Timeout {
  const timer = setTimeout(fire, ms);
  if (options.unref) timer.unref();
  return timer;
}

/**
 * Waits for `work` at most `ms`; the work itself goes on either way (a caller can still await it).
 * Rejects as `work` does when it fails in time.
 */
export async function settleWithin<T>(work: Promise<T>, ms: number, options: TimerOptions = {}): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<Settled<T>>((resolve) => {
    timer = startTimer(ms, () => resolve({ settled: false }), options);
  });
  try {
    return await Promise.race([work.then((value): Settled<T> => ({ settled: true, value })), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `work` with an overall deadline: after `ms` its signal aborts (so work that honours it stops,
 * and never acts late) and the call rejects with `timeoutError()`.
 */
export async function withDeadline<T>(
  ms: number,
  work: (signal: AbortSignal) => Promise<T>,
  timeoutError: () => Error,
  options: TimerOptions = {},
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = startTimer(
      ms,
      () => {
        controller.abort();
        reject(timeoutError());
      },
      options,
    );
  });
  try {
    return await Promise.race([work(controller.signal), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
