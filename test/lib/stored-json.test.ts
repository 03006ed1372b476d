import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { rowsOf } from '../../src/db/rows.js';
import { inStoredKeyOrder } from '../../src/lib/stored-json.js';
import { drivers, openTestDatabase } from '../support/database.js';

/** Values whose keys jsonb reorders: lengths, bytes, case, multi-byte keys, nesting, arrays, `__proto__`. */
const VALUES: unknown[] = [
  { zeta: 1, alpha: 2, b: 3, aa: 4, é: 5, z: 6, B: 7, n: { yy: 1, x: 2 } },
  {
    items: [
      { sku: 'a', id: 1 },
      { id: 2, sku: 'b' },
    ],
    total: { currency: 'eur', cents: 1999 },
  },
  { ÿ: 1, zz: 2, 'a b': 3, '': 4, '10': 5, '9': 6 },
  // Four UTF-8 bytes each, in the order opposite to JavaScript's string comparison (UTF-16 units).
  { '😀': 1, Ａa: 2 },
  JSON.parse('{"__proto__": {"polluted": true}, "a": 1}'),
  [{ b: 1, a: 2 }, 'text', 3, null, true],
  { only: { deeper: { c: 1, b: 2 } } },
  'a string',
  42,
];

describe.each(drivers)('a JSON value in the order jsonb gives it back (%s)', (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  });
  afterAll(() => database.close());

  it.each(VALUES.map((value) => [JSON.stringify(value), value]))('%s serializes as its stored copy reads back', async (_, value) => {
    const [row] = rowsOf<{ value: unknown }>(await database.db.execute(sql`select ${JSON.stringify(value)}::jsonb as value`));
    const readBack = typeof row?.value === 'string' && typeof value !== 'string' ? JSON.parse(row.value) : row?.value;
    expect(JSON.stringify(inStoredKeyOrder(value))).toBe(JSON.stringify(readBack));
  });
});

describe('inStoredKeyOrder', () => {
  it('keeps a key named __proto__ as an own property and leaves the prototype alone', () => {
    const ordered = inStoredKeyOrder(JSON.parse('{"__proto__": {"polluted": true}, "a": 1}')) as Record<string, unknown>;
    expect(Object.keys(ordered)).toEqual(['a', '__proto__']);
    expect(Object.getPrototypeOf(ordered)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('leaves values that are not plain objects as they are', () => {
    const when = new Date(0);
    expect(inStoredKeyOrder(when)).toBe(when);
  });
});
