import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createWorkQueue } from '../../src/lib/work-queue.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Tasks the test finishes by hand, recording which have started. */
function manualTasks() {
  const started: number[] = [];
  const finishers = new Map<number, () => void>();
  const failers = new Map<number, (error: Error) => void>();
  const task = (id: number) => () =>
    new Promise<number>((resolve, reject) => {
      started.push(id);
      finishers.set(id, () => resolve(id));
      failers.set(id, reject);
    });
  return { started, task, finish: (id: number) => finishers.get(id)?.(), fail: (id: number, error: Error) => failers.get(id)?.(error) };
}

/** Lets setImmediate callbacks and settled promises run. */
const turn = () => vi.advanceTimersByTimeAsync(0);

describe('createWorkQueue', () => {
  it('starts tasks on a later turn of the event loop, never more than `concurrency` at once', async () => {
    const queue = createWorkQueue({ concurrency: 2 });
    const tasks = manualTasks();
    const results = [1, 2, 3, 4].map((id) => queue.run(tasks.task(id)));
    expect(tasks.started).toEqual([]);
    expect(queue.pending).toBe(4);
    await turn();
    expect(tasks.started).toEqual([1, 2]);
    tasks.finish(1);
    await turn();
    expect(tasks.started).toEqual([1, 2, 3]);
    tasks.finish(2);
    tasks.finish(3);
    await turn();
    tasks.finish(4);
    await expect(Promise.all(results)).resolves.toEqual([1, 2, 3, 4]);
    expect(queue.pending).toBe(0);
  });

  it('hands a task’s failure to its caller and goes on with the next', async () => {
    const queue = createWorkQueue({ concurrency: 1 });
    const tasks = manualTasks();
    const failing = queue.run(tasks.task(1));
    const next = queue.run(tasks.task(2));
    await turn();
    tasks.fail(1, new Error('decision failed'));
    await expect(failing).rejects.toThrow('decision failed');
    await turn();
    tasks.finish(2);
    await expect(next).resolves.toBe(2);
  });

  it('holds tasks `admit` refuses, asks again after `recheckMs` and on poke()', async () => {
    let open = false;
    const admit = vi.fn(() => open);
    const queue = createWorkQueue({ concurrency: 4, admit, recheckMs: 50 });
    const tasks = manualTasks();
    void queue.run(tasks.task(1));
    await turn();
    expect(tasks.started).toEqual([]);
    const asked = admit.mock.calls.length;
    await vi.advanceTimersByTimeAsync(50);
    expect(admit.mock.calls.length).toBeGreaterThan(asked);
    expect(tasks.started).toEqual([]);
    open = true;
    queue.poke();
    expect(tasks.started).toEqual([1]);
  });

  it('tells `admit` how many run and when the oldest waiting task was queued', async () => {
    let now = 1_000;
    const admit = vi.fn(({ running }: { running: number; oldestQueuedAt: number }) => running === 0);
    const queue = createWorkQueue({ concurrency: 4, admit, now: () => now });
    const tasks = manualTasks();
    void queue.run(tasks.task(1));
    now = 2_000;
    void queue.run(tasks.task(2));
    await turn();
    expect(tasks.started).toEqual([1]);
    expect(admit).toHaveBeenCalledWith({ running: 0, oldestQueuedAt: 1_000 });
    expect(admit).toHaveBeenLastCalledWith({ running: 1, oldestQueuedAt: 2_000 });
  });

  it('drain() runs what `admit` holds and resolves once everything has finished', async () => {
    const queue = createWorkQueue({ concurrency: 2, admit: () => false });
    const tasks = manualTasks();
    void queue.run(tasks.task(1));
    void queue.run(tasks.task(2));
    let drained = false;
    const draining = queue.drain().then(() => (drained = true));
    expect(tasks.started).toEqual([1, 2]);
    tasks.finish(1);
    await turn();
    expect(drained).toBe(false);
    tasks.finish(2);
    await draining;
    expect(drained).toBe(true);
  });

  it('drain(timeoutMs) gives up waiting after that long; the tasks go on', async () => {
    const queue = createWorkQueue({ concurrency: 1 });
    const tasks = manualTasks();
    const result = queue.run(tasks.task(1));
    await turn();
    let drained = false;
    const draining = queue.drain(1_000).then(() => (drained = true));
    await vi.advanceTimersByTimeAsync(999);
    expect(drained).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await draining;
    expect(queue.pending).toBe(1);
    tasks.finish(1);
    await expect(result).resolves.toBe(1);
  });
});
