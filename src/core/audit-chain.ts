import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import { canonicalJson, sha256Hex } from './secrets.js';
import type { AuditEventRecord, ChainedAuditEvent } from './model.js';

/** The hash of the empty chain's "previous row". */
export const genesisHash = '0'.repeat(64);

type ChainedFields = Pick<AuditEventRecord, 'at' | 'type' | 'actor' | 'proposalId' | 'agentId' | 'data'> & { prevHash: string };

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

/**
 * A signed statement "the chain had `size` rows and these were the hashes of rows `from`+1 … `size`".
 * Published outside the database, it pins history: whoever can rewrite the table (and recompute
 * every hash) cannot re-sign what was already published without the key the database never holds.
 */
export interface AuditCheckpoint {
  origin: typeof CHECKPOINT_ORIGIN;
  size: number;
  from: number;
  head: string;
  hashes: string[];
  timestamp: string;
  keyId: string;
  /** Ed25519 over the canonical JSON of every other field, base64. */
  signature: string;
}

export const CHECKPOINT_ORIGIN = 'twokey-audit-checkpoint/v1';

export type UnsignedCheckpoint = Omit<AuditCheckpoint, 'signature'>;

/** The raw 32-byte Ed25519 public key, base64: what an auditor pins. */
export function publicKeyText(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new Error('not an Ed25519 key');
  return Buffer.from(jwk.x, 'base64url').toString('base64');
}

export function publicKeyFromText(text: string): KeyObject {
  const raw = Buffer.from(text.trim(), 'base64');
  if (raw.length !== 32) throw new Error('an audit public key is 32 bytes of base64');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

export const keyIdOf = (key: KeyObject): string => createHash('sha256').update(publicKeyText(key)).digest('hex').slice(0, 16);

export const checkpointMessage = (checkpoint: UnsignedCheckpoint): Buffer => Buffer.from(canonicalJson(checkpoint), 'utf8');

export type ChainVerdict =
  | { ok: true; rows: number; pending?: number; checkpoints?: number; covered?: number; signedAt?: string }
  | { ok: false; rows: number; seq: number; reason: string };

interface Published {
  hash: string;
  checkpoint: AuditCheckpoint;
}

export type CheckpointIndex =
  { ok: true; bySeq: Map<number, Published>; last: AuditCheckpoint | null; count: number } | { ok: false; seq: number; reason: string };

const describe = (checkpoint: AuditCheckpoint) => `checkpoint of size ${checkpoint.size} signed ${checkpoint.timestamp}`;

/**
 * Checks each published checkpoint's signature against the trusted keys and its own shape, and
 * indexes the hash it states for every row. Two checkpoints stating different hashes for one row
 * is a fork: reported as such.
 */
export function indexCheckpoints(checkpoints: readonly AuditCheckpoint[], trustedKeys: readonly KeyObject[]): CheckpointIndex {
  const keys = new Map(trustedKeys.map((key) => [keyIdOf(key), key]));
  const bySeq = new Map<number, Published>();
  let last: AuditCheckpoint | null = null;
  for (const checkpoint of [...checkpoints].sort((a, b) => a.size - b.size)) {
    const { signature, ...unsigned } = checkpoint;
    const key = keys.get(checkpoint.keyId);
    if (!key) return { ok: false, seq: checkpoint.size, reason: `${describe(checkpoint)} is signed by key ${checkpoint.keyId}, which is not trusted` };
    if (!verifySignature(null, checkpointMessage(unsigned), key, Buffer.from(signature, 'base64'))) {
      return { ok: false, seq: checkpoint.size, reason: `${describe(checkpoint)} has a signature that does not verify` };
    }
    if (checkpoint.from + checkpoint.hashes.length !== checkpoint.size || checkpoint.hashes.at(-1) !== checkpoint.head) {
      return { ok: false, seq: checkpoint.size, reason: `${describe(checkpoint)} is malformed` };
    }
    for (const [index, hash] of checkpoint.hashes.entries()) {
      const seq = checkpoint.from + index + 1;
      const earlier = bySeq.get(seq);
      if (earlier && earlier.hash !== hash)
        return { ok: false, seq, reason: `the ${describe(earlier.checkpoint)} and the ${describe(checkpoint)} disagree on this row` };
      bySeq.set(seq, { hash, checkpoint });
    }
    last = checkpoint;
  }
  return { ok: true, bySeq, last, count: checkpoints.length };
}

/**
 * Walks the chain in `seq` order and names the first row whose place, link or content does not
 * hold. With published checkpoints it also names the first row whose hash differs from the one a
 * checkpoint signed (a rewrite with every later hash recomputed), and a tail that was published
 * but is gone from the table.
 */
export async function verifyAuditChain(
  rows: Iterable<ChainedAuditEvent> | AsyncIterable<ChainedAuditEvent>,
  published?: CheckpointIndex,
): Promise<ChainVerdict> {
  if (published && !published.ok) return { ok: false, rows: 0, seq: published.seq, reason: published.reason };
  let previous = genesisHash;
  let count = 0;
  for await (const row of rows) {
    count += 1;
    if (row.seq !== count) {
      return { ok: false, rows: count, seq: count, reason: `row ${count} is missing (the next row is ${row.seq})` };
    }
    if (row.prevHash !== previous) {
      return { ok: false, rows: count, seq: row.seq, reason: 'prev_hash does not match the previous row' };
    }
    if (auditHash(row) !== row.hash) {
      return { ok: false, rows: count, seq: row.seq, reason: 'row content does not match its hash' };
    }
    const pinned = published?.bySeq.get(row.seq);
    if (pinned && pinned.hash !== row.hash) {
      return { ok: false, rows: count, seq: row.seq, reason: `row differs from the ${describe(pinned.checkpoint)}: rewritten, reordered or removed` };
    }
    previous = row.hash;
  }
  const last = published?.last;
  if (last && last.size > count) {
    return { ok: false, rows: count, seq: count + 1, reason: `rows ${count + 1}…${last.size} are gone from the table: the ${describe(last)} covers them` };
  }
  if (!published) return { ok: true, rows: count };
  return { ok: true, rows: count, checkpoints: published.count, covered: last?.size ?? 0, ...(last ? { signedAt: last.timestamp } : {}) };
}

/** How the chain fails to continue what was signed: its newest rows are gone, or a signed row changed. */
export interface ContinuationProblem {
  kind: 'tail_deleted' | 'history_rewritten';
  message: string;
}

/**
 * Whether a chain whose head is `head`, and whose row `signed.size` has the hash `hashAtSignedSize`,
 * still continues the signed checkpoint `signed`. Signing on top of anything else would publish a
 * second, conflicting history under the same key: the integrator refuses and raises an alert.
 */
export function continuationProblem(
  signed: Pick<AuditCheckpoint, 'size' | 'head' | 'timestamp'>,
  head: { seq: number; hash: string } | null,
  hashAtSignedSize: string | null,
): ContinuationProblem | null {
  const size = head?.seq ?? 0;
  if (size < signed.size) {
    return {
      kind: 'tail_deleted',
      message: `the chain ends at row ${size}, but ${signed.size} rows were signed at ${signed.timestamp}: rows ${size + 1}…${signed.size} are gone from the table`,
    };
  }
  if (hashAtSignedSize !== signed.head) {
    return {
      kind: 'history_rewritten',
      message: `row ${signed.size} no longer has the hash signed at ${signed.timestamp}: the chain up to it was rewritten`,
    };
  }
  return null;
}

export const ALERT_ORIGIN = 'twokey-audit-alert/v1';

/**
 * What the integrator sends its sinks when it refuses to sign: signed like a checkpoint (its own
 * `origin`, so neither can pass for the other), so a receiver can tell it came from the signer.
 */
export interface AuditAlert {
  origin: typeof ALERT_ORIGIN;
  kind: ContinuationProblem['kind'];
  message: string;
  /** The last checkpoint the integrator signed, which the chain no longer continues. */
  signed: { size: number; head: string; timestamp: string };
  /** The chain as the integrator found it: its length, and the hash now at the signed size. */
  found: { size: number; hashAtSignedSize: string | null };
  timestamp: string;
  keyId: string;
  signature: string;
}

export type UnsignedAuditAlert = Omit<AuditAlert, 'signature' | 'keyId'>;

export const alertMessage = (alert: Omit<AuditAlert, 'signature'>): Buffer => Buffer.from(canonicalJson(alert), 'utf8');

/** Whether an alert was signed by one of these keys (what a webhook receiver checks before it pages anyone). */
export function alertSignedBy(alert: AuditAlert, trustedKeys: readonly KeyObject[]): boolean {
  const { signature, ...unsigned } = alert;
  const key = trustedKeys.find((candidate) => keyIdOf(candidate) === alert.keyId);
  return key !== undefined && verifySignature(null, alertMessage(unsigned), key, Buffer.from(signature, 'base64'));
}
