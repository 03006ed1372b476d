import { inArray, sql, type SQL } from 'drizzle-orm';
import { UNFINISHED_STATUSES } from '../core/model.js';
import type { Db } from './database.js';
import { rowsOf } from './rows.js';

const DAY_MS = 24 * 3_600_000;

/**
 * What expires, and when it may go. Each rule deletes at most one batch per run, so a large backlog
 * is worked off over several sweeps instead of in one long lock-holding statement.
 */
function rules(now: Date): Array<{ table: string; where: SQL }> {
  const at = (date: Date) => sql`${date.toISOString()}::timestamptz`;
  const dayAgo = new Date(now.getTime() - DAY_MS);
  return [
    // Finished jobs are kept a day for `twokey jobs list`; dead ones stay until an operator acts.
    { table: 'jobs', where: sql`status = 'done' and updated_at < ${at(dayAgo)}` },
    { table: 'idempotency_keys', where: sql`expires_at <= ${at(now)}` },
    // AGP tokens outlive their expiry by a day so a late execute still gets "expired", not "invalid".
    { table: 'agp_tokens', where: sql`expires_at <= ${at(dayAgo)}` },
    { table: 'approver_links', where: sql`expires_at <= ${at(now)}` },
    // A mailed link outlives its proposal by a day, so a late click reads "expired", not "unknown".
    { table: 'email_links', where: sql`expires_at <= ${at(dayAgo)}` },
    // A passkey challenge is worth nothing once expired: the approval that spent one keeps its nonce.
    { table: 'passkey_challenges', where: sql`expires_at <= ${at(now)}` },
    { table: 'console_sessions', where: sql`expires_at <= ${at(now)} or revoked_at <= ${at(dayAgo)}` },
    // A request identity goes a day after its last use and its proposal's expiry, never while the
    // proposal is still open: a repeat that late is a new call (src/core/request-identity.ts).
    {
      table: 'request_identities',
      where: sql`updated_at < ${at(dayAgo)} and not exists (
        select 1 from proposals p where p.id = request_identities.proposal_id
           and (${inArray(sql`p.status`, [...UNFINISHED_STATUSES])} or p.expires_at > ${at(dayAgo)}))`,
    },
  ];
}

export type PruneCounts = Record<string, number>;

/** Deletes one bounded batch of every kind of expired row; answers how many rows went, per table. */
export async function pruneExpired(db: Db, now: Date, batchSize = 500): Promise<PruneCounts> {
  const counts: PruneCounts = {};
  for (const rule of rules(now)) {
    const result = await db.execute(sql`
      delete from ${sql.identifier(rule.table)}
      where ctid in (select ctid from ${sql.identifier(rule.table)} where ${rule.where} limit ${batchSize}::int)
      returning 1`);
    counts[rule.table] = rowsOf(result).length;
  }
  return counts;
}
