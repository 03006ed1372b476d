/** The rows of a raw `execute`: postgres.js answers with an array, PGlite with `{ rows }`. */
export function rowsOf<T = unknown>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}
