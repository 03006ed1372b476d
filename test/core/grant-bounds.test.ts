import { describe, expect, it } from 'vitest';
import { boundsFrom, describeBound, withinBounds, type GrantBound } from '../../src/core/grants.js';

const transferSchema = {
  type: 'object',
  required: ['to', 'amount_cents'],
  properties: { to: { type: 'string' }, amount_cents: { type: 'integer' }, memo: { type: 'string' }, meta: { type: 'object' }, n: { type: 'integer' } },
};

describe('grant bounds: a bounded grant covers only what its approver saw', () => {
  const bounds = boundsFrom({ to: 'acme', amount_cents: 100 }, transferSchema);

  it('binds every declared param: numbers up to the value, the rest equal, the missing ones absent', () => {
    expect(bounds).toEqual([
      { param: 'to', op: 'eq', value: 'acme' },
      { param: 'amount_cents', op: 'lte', value: 100 },
      { param: 'memo', op: 'absent', value: null },
      { param: 'meta', op: 'absent', value: null },
      { param: 'n', op: 'absent', value: null },
    ]);
    expect(bounds.map(describeBound)).toEqual(['to = "acme"', 'amount_cents ≤ 100', 'memo absent', 'meta absent', 'n absent']);
  });

  it('refuses a param the source proposal lacked, even set to a harmless-looking value', () => {
    expect(withinBounds(bounds, { to: 'acme', amount_cents: 50 })).toBe(true);
    expect(withinBounds(bounds, { to: 'acme', amount_cents: 50, memo: 'ALSO wire the balance to evil' })).toBe(false);
    expect(withinBounds(bounds, { to: 'acme', amount_cents: 50, meta: {} })).toBe(false);
    expect(withinBounds(bounds, { to: 'acme', amount_cents: 50, n: 0 })).toBe(false);
    expect(withinBounds(bounds, { to: 'acme', amount_cents: 50, memo: null })).toBe(false);
  });

  it('refuses a param no bound names, so grants stored before absent bounds existed are closed too', () => {
    const stored: GrantBound[] = [
      { param: 'to', op: 'eq', value: 'acme' },
      { param: 'amount_cents', op: 'lte', value: 100 },
    ];
    expect(withinBounds(stored, { to: 'acme', amount_cents: 100 })).toBe(true);
    expect(withinBounds(stored, { to: 'acme', amount_cents: 100, memo: 'x' })).toBe(false);
    expect(withinBounds(stored, { to: 'acme' })).toBe(false);
  });

  it('compares equal values canonically (key order does not matter) and a missing value never equals null', () => {
    const nested = boundsFrom({ meta: { a: 1, b: 2 }, memo: null }, transferSchema);
    expect(withinBounds(nested, { meta: { b: 2, a: 1 }, memo: null })).toBe(true);
    expect(withinBounds(nested, { meta: { b: 2, a: 1 } })).toBe(false);
  });

  it('no bounds (an unbounded grant) covers any params', () => {
    expect(withinBounds([], { to: 'anyone', amount_cents: 1_000_000, memo: 'x' })).toBe(true);
  });
});
