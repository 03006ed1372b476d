import { describe, expect, it } from 'vitest';
import { failedTokenCheck } from '../../src/core/token-checks.js';

describe('the one token-check order (/v1 commit and AGP execute)', () => {
  const now = new Date('2026-11-22T10:00:00.000Z');
  const token = { holder: 'argus', request: 'a', expiresAt: new Date(now.getTime() + 60_000), consumedAt: null as Date | null };
  const check = (held: typeof token | null, caller = 'argus', request = 'a', at = now) =>
    failedTokenCheck(held, { heldByCaller: (t) => t.holder === caller, bindingMismatch: (t) => (t.request === request ? null : 'mismatch') }, at);

  it('passes a live token of the caller for its own request', () => {
    expect(check(token)).toBeNull();
  });

  it('names the first failing check, in order: exists, principal, consumed, expired, binding', () => {
    const spentAndLate = { ...token, consumedAt: now, expiresAt: now };
    expect(check(null, 'other', 'b')).toBe('invalid_token');
    expect(check(spentAndLate, 'other', 'b')).toBe('principal_mismatch');
    expect(check(spentAndLate, 'argus', 'b')).toBe('consumed');
    expect(check({ ...token, expiresAt: now }, 'argus', 'b')).toBe('expired');
    expect(check(token, 'argus', 'b')).toBe('mismatch');
  });

  it('pins the expiry boundary: valid 1 ms before expiresAt, expired at it', () => {
    expect(check(token, 'argus', 'a', new Date(token.expiresAt.getTime() - 1))).toBeNull();
    expect(check(token, 'argus', 'a', token.expiresAt)).toBe('expired');
  });
});
