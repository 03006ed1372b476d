import { describe, expect, it } from 'vitest';
import { asRecord, isRecord } from '../../src/lib/records.js';

describe('isRecord and asRecord', () => {
  it('accept plain objects only', () => {
    for (const value of [{}, { a: 1 }, Object.create(null) as object]) {
      expect(isRecord(value)).toBe(true);
      expect(asRecord(value)).toBe(value);
    }
    for (const value of [null, undefined, [], [1], 'text', 1, true]) {
      expect(isRecord(value)).toBe(false);
      expect(asRecord(value)).toBeNull();
    }
  });
});
