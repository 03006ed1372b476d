import { afterAll, beforeAll, expect } from 'vitest';

/**
 * Each test file runs with Node's own timers and clock. A worker runs many test files in one process
 * (vitest.config.ts: isolate: false), and a fake timer left installed, or a spy on a fake one (which
 * vitest puts back once the file is over, after its hooks), made the files after it wait on timers
 * that never fire: an SMTP server that never greeted, a database set-up that hung for minutes, an
 * outbox wake-up that never came, each far from its cause. A file that ends with them replaced
 * fails; one that finds them replaced when it starts (put back after the last file's hooks) gets
 * Node's own again, and says which file ran before it.
 */
const NAMES = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date'] as const;
type Name = (typeof NAMES)[number];

// Taken once per worker, when its first file loads this (before any test can replace them).
const key = Symbol.for('twokey.test.realTimers');
const store = globalThis as typeof globalThis & { [key]?: { timers: Record<Name, unknown>; lastFile: string } };
const state = (store[key] ??= { timers: Object.fromEntries(NAMES.map((name) => [name, globalThis[name]])) as Record<Name, unknown>, lastFile: '' });

/** The names no longer Node's own, each put back. */
function putBack(): Name[] {
  const replaced = NAMES.filter((name) => globalThis[name] !== state.timers[name]);
  for (const name of replaced) Object.assign(globalThis, { [name]: state.timers[name] });
  return replaced;
}

beforeAll(() => {
  const replaced = putBack();
  if (replaced.length > 0) console.warn(`${state.lastFile} left ${replaced.join(', ')} replaced once it ended (a spy on a fake clock): put back`);
});

afterAll(() => {
  state.lastFile = expect.getState().testPath ?? 'the test file before this one';
  const replaced = putBack();
  if (replaced.length > 0) throw new Error(`this test file left ${replaced.join(', ')} replaced (a fake clock): restore Node's own in its afterEach`);
});
