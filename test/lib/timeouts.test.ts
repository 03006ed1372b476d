import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { settleWithin, withDeadline } from '../../src/lib/timeouts.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A promise the test settles by hand. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('settleWithin', () => {
  it('gives the value of work that settles in time, and leaves no timer behind', async () => {
    const work = deferred<string>();
    const outcome = settleWithin(work.promise, 100);
    await vi.advanceTimersByTimeAsync(99);
    work.resolve('done');
    await expect(outcome).resolves.toEqual({ settled: true, value: 'done' });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('says "not settled" once the time is up, and the work can still be awaited', async () => {
    const work = deferred<string>();
    const outcome = settleWithin(work.promise, 100);
    await vi.advanceTimersByTimeAsync(100);
    await expect(outcome).resolves.toEqual({ settled: false });
    work.resolve('later');
    await expect(work.promise).resolves.toBe('later');
  });

  it('rejects as the work does when it fails in time', async () => {
    const work = deferred<string>();
    const outcome = settleWithin(work.promise, 100);
    work.reject(new Error('refused'));
    await expect(outcome).rejects.toThrow('refused');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps the process alive for its timer unless told otherwise', async () => {
    // On the real timers: a spy put on the fake `setTimeout` outlived the fake clock in this worker
    // (vitest.config.ts: isolate: false), and the test files after it found timers that never fired.
    vi.useRealTimers();
    const work = deferred<void>();
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    void settleWithin(work.promise, 50, { unref: true });
    const timer = setTimeoutSpy.mock.results.at(-1)?.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    void settleWithin(work.promise, 50);
    const referenced = setTimeoutSpy.mock.results.at(-1)?.value as NodeJS.Timeout;
    expect(referenced.hasRef()).toBe(true);
    setTimeoutSpy.mockRestore();
    work.resolve();
  });
});

describe('withDeadline', () => {
  it('gives the work’s answer in time, with its signal never aborted', async () => {
    let seen: AbortSignal | undefined;
    const answer = await withDeadline(
      100,
      async (signal) => {
        seen = signal;
        return 42;
      },
      () => new Error('late'),
    );
    expect(answer).toBe(42);
    expect(seen?.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('aborts the signal and rejects with the given error once the time is up', async () => {
    let seen: AbortSignal | undefined;
    const never = withDeadline(
      100,
      (signal) => {
        seen = signal;
        return new Promise<never>(() => {});
      },
      () => new RangeError('no answer within 100 ms'),
    );
    const checked = expect(never).rejects.toThrow(RangeError);
    await vi.advanceTimersByTimeAsync(100);
    await checked;
    expect(seen?.aborted).toBe(true);
  });

  it('passes the work’s own failure on', async () => {
    await expect(
      withDeadline(
        100,
        () => Promise.reject(new Error('refused')),
        () => new Error('late'),
      ),
    ).rejects.toThrow('refused');
    expect(vi.getTimerCount()).toBe(0);
  });
});
