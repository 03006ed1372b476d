/**
 * A JSON value as PostgreSQL's `jsonb` gives it back: every object's keys in the order `jsonb` keeps
 * them (shorter keys first, keys of one length by their UTF-8 bytes), arrays in their order. A value
 * answered from memory after it was stored (an execution's result) is then the same, byte for byte
 * once serialized, as the next read of it. Only plain objects are reordered; anything else is kept
 * as it is.
 */
export function inStoredKeyOrder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(inStoredKeyOrder);
  if (!isPlainObject(value)) return value;
  // Every commit of a result passes here: each key is measured once, not once per comparison, and
  // an ASCII key (almost every key) is its own UTF-8, so compares as a string without a buffer.
  const keys = Object.keys(value).map(sortKey);
  keys.sort(byJsonbKeyOrder);
  // fromEntries defines each key as its own property, `__proto__` (which JSON.parse can give) too.
  return Object.fromEntries(keys.map(({ key }) => [key, inStoredKeyOrder(value[key])]));
}

interface SortKey {
  key: string;
  /** Its UTF-8 bytes, for a key that is not ASCII; null for one that is (its string is its bytes). */
  bytes: Buffer | null;
  byteLength: number;
}

function sortKey(key: string): SortKey {
  // A key of one-byte characters only has as many UTF-8 bytes as UTF-16 units.
  const byteLength = Buffer.byteLength(key);
  if (byteLength === key.length) return { key, bytes: null, byteLength };
  return { key, bytes: Buffer.from(key), byteLength };
}

function byJsonbKeyOrder(a: SortKey, b: SortKey): number {
  if (a.byteLength !== b.byteLength) return a.byteLength - b.byteLength;
  if (!a.bytes && !b.bytes) return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  return Buffer.compare(a.bytes ?? Buffer.from(a.key), b.bytes ?? Buffer.from(b.key));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}
