import { randomBytesFromPool } from '../lib/random.js';

/** Ids carry their type (`prp_…`, `agt_…`) so a log line says what it points at. */
export type IdPrefix = 'prp' | 'agt' | 'grt';

export function newId(prefix: IdPrefix): string {
  // From the pool: a proposal's id is one of several random values each call draws (src/lib/random.ts).
  return `${prefix}_${randomBytesFromPool(12).toString('base64url')}`;
}
