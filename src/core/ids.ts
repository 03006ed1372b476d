import { randomBytes } from 'node:crypto';

/** Ids carry their type (`prp_…`, `agt_…`) so a log line says what it points at. */
export type IdPrefix = 'prp' | 'agt' | 'grt';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}
