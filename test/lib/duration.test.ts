import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/lib/duration.js';

describe('parseDuration', () => {
  it.each([
    ['250ms', 250],
    ['10s', 10_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['7d', 604_800_000],
  ])('%s is %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '5', '300', '5 minutes', '1.5h', '-5m', '5M', '1h30m'])('refuses %j', (text) => {
    expect(() => parseDuration(text)).toThrow(RangeError);
  });
});
