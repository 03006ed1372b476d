import { sql } from 'drizzle-orm';
import { auditHash, genesisHash } from '../../src/core/audit-chain.js';
import type { Db } from '../../src/db/database.js';

export const rowsOf = async (db: Db) => {
  const result = await db.execute(
    sql`select id, seq, at, type, actor, proposal_id, agent_id, data, prev_hash, hash from audit_events where seq is not null order by seq`,
  );
  return (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Array<Record<string, any>>;
};

/**
 * The attacker owns the table: disables the append-only trigger, edits, and recomputes every later
 * hash so that the chain alone verifies again.
 */
export async function rewriteAndRechain(db: Db, edit: () => Promise<unknown>): Promise<void> {
  await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
  await edit();
  let previous = genesisHash;
  for (const row of await rowsOf(db)) {
    const hash = auditHash({
      prevHash: previous,
      at: new Date(row.at),
      type: row.type,
      actor: row.actor,
      proposalId: row.proposal_id,
      agentId: row.agent_id,
      data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data,
    });
    await db.execute(sql`update audit_events set prev_hash = ${previous}, hash = ${hash} where id = ${row.id}`);
    previous = hash;
  }
  await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);
}
