import { describe, expect, it } from 'vitest';
import { randomBytesFromPool } from '../../src/lib/random.js';

describe('random bytes from the pool', () => {
  it('hands out bytes of the size asked, never the same bytes twice, across refills of the pool', () => {
    const seen = new Set<string>();
    // 2 000 draws of 12 bytes: several 4 KiB pools.
    for (let i = 0; i < 2_000; i += 1) {
      const bytes = randomBytesFromPool(12);
      expect(bytes).toHaveLength(12);
      seen.add(bytes.toString('hex'));
    }
    expect(seen.size).toBe(2_000);
  });

  it('gives each caller its own copy: the pool wiping what it handed out, or refilling, leaves it as it was', () => {
    const bytes = randomBytesFromPool(32);
    const copy = Buffer.from(bytes);
    expect(bytes.equals(Buffer.alloc(32))).toBe(false);
    for (let i = 0; i < 300; i += 1) randomBytesFromPool(32);
    expect(bytes.equals(copy)).toBe(true);
  });

  it('serves a large request straight from the CSPRNG', () => {
    const large = randomBytesFromPool(4_096);
    expect(large).toHaveLength(4_096);
    expect(large.equals(Buffer.alloc(4_096))).toBe(false);
  });
});
