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
  // fromEntries defines each key as its own property, `__proto__` (which JSON.parse can give) too.
  return Object.fromEntries(
    Object.keys(value)
      .sort(byJsonbKeyOrder)
      .map((key) => [key, inStoredKeyOrder(value[key])]),
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function byJsonbKeyOrder(a: string, b: string): number {
  const lengths = Buffer.byteLength(a) - Buffer.byteLength(b);
  return lengths !== 0 ? lengths : Buffer.compare(Buffer.from(a), Buffer.from(b));
}
