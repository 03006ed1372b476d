import { describe, expect, it } from 'vitest';
import { createGroupCommit } from '../../src/lib/group-commit.js';

/** A database stand-in that answers only when told to, and remembers what each statement carried. */
function heldWrites(options: { failBatchesWith?: (items: readonly string[]) => string | null; failOne?: (item: string) => boolean } = {}) {
  const statements: string[][] = [];
  const waiting: Array<() => void> = [];
  const held = () => new Promise<void>((resolve) => waiting.push(resolve));
  const write = createGroupCommit<string, string>({
    maxBatch: 3,
    // In these tests a batch failing with "connection lost" may have been written.
    refusedWhole: (error) => !(error instanceof Error && error.message === 'connection lost'),
    keyOf: (item) => item.split('#')[0] ?? item,
    async runOne(item) {
      statements.push([item]);
      await held();
      if (options.failOne?.(item)) throw new Error(`refused ${item}`);
      return `one:${item}`;
    },
    async runBatch(items) {
      statements.push([...items]);
      await held();
      const failure = options.failBatchesWith?.(items);
      if (failure) throw new Error(failure);
      return items.map((item) => `batch:${item}`);
    },
  });
  /** Lets the statement in flight answer, then waits until the next one is sent (or nothing is left). */
  const answer = async () => {
    waiting.shift()?.();
    for (let turn = 0; turn < 5; turn += 1) await Promise.resolve();
  };
  return { write, statements, answer, inFlight: () => waiting.length };
}

describe('group commit', () => {
  it('sends a lone write at once, as itself', async () => {
    const { write, statements, answer } = heldWrites();
    const result = write('a');
    expect(statements).toEqual([['a']]);
    await answer();
    await expect(result).resolves.toBe('one:a');
  });

  it('sends what arrived during a round trip together in the next statement, one statement at a time', async () => {
    const { write, statements, answer, inFlight } = heldWrites();
    const results = ['a', 'b', 'c', 'd'].map((item) => write(item));
    expect(statements).toEqual([['a']]);
    expect(inFlight()).toBe(1);
    await answer();
    expect(statements).toEqual([['a'], ['b', 'c', 'd']]);
    expect(inFlight()).toBe(1);
    await answer();
    expect(await Promise.all(results)).toEqual(['one:a', 'batch:b', 'batch:c', 'batch:d']);
  });

  it('carries at most maxBatch writes a statement, in arrival order', async () => {
    const { write, statements, answer } = heldWrites();
    const results = ['a', 'b', 'c', 'd', 'e', 'f'].map((item) => write(item));
    await answer();
    await answer();
    await answer();
    expect(statements).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f']]);
    expect(await Promise.all(results)).toEqual(['one:a', 'batch:b', 'batch:c', 'batch:d', 'batch:e', 'batch:f']);
  });

  it('never puts two writes with the same key in one statement: the later one goes in the next', async () => {
    const { write, statements, answer } = heldWrites();
    const results = ['x', 'k#1', 'm', 'k#2', 'n'].map((item) => write(item));
    await answer();
    await answer();
    await answer();
    expect(statements).toEqual([['x'], ['k#1', 'm', 'n'], ['k#2']]);
    expect(await Promise.all(results)).toEqual(['one:x', 'batch:k#1', 'batch:m', 'one:k#2', 'batch:n']);
  });

  it('sends each write of a failed batch on its own, so only the faulty one fails', async () => {
    const { write, statements, answer } = heldWrites({ failBatchesWith: () => 'one row was refused', failOne: (item) => item === 'bad' });
    const results = ['a', 'b', 'bad', 'c'].map((item) =>
      write(item).then(
        (value) => ({ value }),
        (error: Error) => ({ error: error.message }),
      ),
    );
    await answer();
    await answer();
    // The three single retries are in flight together.
    await answer();
    await answer();
    await answer();
    expect(statements).toEqual([['a'], ['b', 'bad', 'c'], ['b'], ['bad'], ['c']]);
    expect(await Promise.all(results)).toEqual([{ value: 'one:a' }, { value: 'one:b' }, { error: 'refused bad' }, { value: 'one:c' }]);
  });

  it('fails every write of a batch whose fate is unknown, and sends none of them again', async () => {
    const { write, statements, answer } = heldWrites({ failBatchesWith: () => 'connection lost' });
    const results = ['a', 'b', 'c'].map((item) =>
      write(item).then(
        (value) => ({ value }),
        (error: Error) => ({ error: error.message }),
      ),
    );
    await answer();
    await answer();
    expect(statements).toEqual([['a'], ['b', 'c']]);
    expect(await Promise.all(results)).toEqual([{ value: 'one:a' }, { error: 'connection lost' }, { error: 'connection lost' }]);
    // Writes that come after it go on as usual.
    const next = write('d');
    await answer();
    await expect(next).resolves.toBe('one:d');
  });

  it('keeps going after a lone write fails', async () => {
    const { write, statements, answer } = heldWrites({ failOne: (item) => item === 'bad' });
    const failed = write('bad');
    const next = write('b');
    await answer();
    await expect(failed).rejects.toThrow('refused bad');
    await answer();
    await expect(next).resolves.toBe('one:b');
    expect(statements).toEqual([['bad'], ['b']]);
  });
});
