import { TwokeyError } from '../core/errors.js';

/**
 * JSON numbers past ±Number.MAX_SAFE_INTEGER cannot be held exactly: 9007199254740993 parses as
 * 9007199254740992, so an agent would see one amount approved and another one run. JSON.parse has
 * already rounded by the time anything can look, but every such number parses to a value past the
 * limit (rounding never crosses it), so the parsed value is enough to find them.
 */

const pointerSegment = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** The JSON pointer of the first number in `value` beyond the safe integer range, or null. Iterative. */
export function unsafeNumberPointer(value: unknown): string | null {
  const pending: Array<{ value: unknown; pointer: string }> = [{ value, pointer: '' }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const current = next.value;
    if (typeof current === 'number' && Math.abs(current) > Number.MAX_SAFE_INTEGER) return next.pointer || '/';
    if (typeof current !== 'object' || current === null) continue;
    const entries = Array.isArray(current) ? current.map((item, index) => [String(index), item] as const) : Object.entries(current);
    // Reversed so the first offender in document order is the one reported.
    for (const [key, item] of entries.reverse()) pending.push({ value: item, pointer: `${next.pointer}/${pointerSegment(key)}` });
  }
  return null;
}

/** Throws the 400 naming where the number is. */
export function refuseUnsafeNumbers(body: unknown): void {
  const pointer = unsafeNumberPointer(body);
  if (pointer === null) return;
  const message = `the number at ${pointer} is beyond ±${Number.MAX_SAFE_INTEGER} and cannot be kept exactly; send it as a string`;
  throw new TwokeyError('invalid_request', message, [{ path: pointer, message: 'number beyond Number.MAX_SAFE_INTEGER' }]);
}
