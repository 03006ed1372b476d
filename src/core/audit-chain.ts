import { canonicalJson, sha256Hex } from './secrets.js';
import type { AuditEventRecord } from './model.js';

/** The hash of the empty chain's "previous row". */
export const genesisHash = '0'.repeat(64);

type ChainedFields = Omit<AuditEventRecord, 'seq' | 'hash'>;

/**
 * Each row's hash covers its own content and the previous row's hash, so changing, removing or
 * reordering any row breaks every hash after it.
 */
export function auditHash(event: ChainedFields): string {
  return sha256Hex(
    canonicalJson({
      prevHash: event.prevHash,
      at: event.at.toISOString(),
      type: event.type,
      actor: event.actor,
      proposalId: event.proposalId,
      agentId: event.agentId,
      data: event.data,
    }),
  );
}

export type ChainVerdict = { ok: true; rows: number } | { ok: false; rows: number; seq: number; reason: string };

/** Walks rows in `seq` order; names the first row whose link or content does not hold. */
export async function verifyAuditChain(
  rows: Iterable<AuditEventRecord> | AsyncIterable<AuditEventRecord>,
): Promise<ChainVerdict> {
  let previous = genesisHash;
  let count = 0;
  for await (const row of rows) {
    count += 1;
    if (row.prevHash !== previous) {
      return { ok: false, rows: count, seq: row.seq, reason: 'prev_hash does not match the previous row' };
    }
    if (auditHash(row) !== row.hash) {
      return { ok: false, rows: count, seq: row.seq, reason: 'row content does not match its hash' };
    }
    previous = row.hash;
  }
  return { ok: true, rows: count };
}
