import fc from 'fast-check';
import { afterEach } from 'vitest';

/**
 * One seed for every random choice the tests make (fast-check's fuzzers, shuffles, picks), so a
 * failure reproduces: a failing run prints `TEST_SEED=…`; run again with it set to replay it.
 * Set TEST_SEED to anything else to explore other cases.
 */
export const TEST_SEED = parseSeed(process.env.TEST_SEED);

function parseSeed(value: string | undefined): number {
  if (value === undefined || value === '') return 20_261_123;
  const seed = Number(value);
  if (!Number.isSafeInteger(seed)) throw new Error(`TEST_SEED must be an integer, not ${JSON.stringify(value)}`);
  return seed;
}

/** A small seeded generator (mulberry32): the same seed gives the same sequence on every machine. */
export function seededRandom(seed: number = TEST_SEED): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A seeded Fisher–Yates shuffle (sorting by a random comparator is neither uniform nor stable). */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

fc.configureGlobal({ seed: TEST_SEED });

afterEach(({ task }) => {
  if (task.result?.state === 'fail') console.error(`replay this failure with TEST_SEED=${TEST_SEED}`);
});
