import type { AuditCheckpoint, ContinuationProblem, UnsignedCheckpoint } from '../core/audit-chain.js';
import type { AuditEventRecord, ChainedAuditEvent } from '../core/model.js';
import type { AuditQuery } from '../core/ports.js';

/**
 * The storage the integrator and the witness need, declared here and implemented by
 * `src/db/audit-log.ts` (the one module that writes the chain); the runtime hands it in.
 */

export interface IntegratedBatch {
  rows: number;
  checkpoint: AuditCheckpoint | null;
  /** Set when the chain no longer continues `floor`: nothing was placed or signed. */
  conflict?: ContinuationProblem & { found: { size: number; hashAtSignedSize: string | null } };
}

export interface StoredCheckpoint {
  size: number;
  checkpoint: AuditCheckpoint;
  publishedTo: string[];
}

/** The audit log as the integrator, the witness and `twokey audit verify` read and place it. */
export interface AuditLog {
  list(query: AuditQuery): Promise<AuditEventRecord[]>;
  pendingCount(): Promise<number>;
  /** Cheap enough to ask every tick. */
  hasPending(): Promise<boolean>;
  /**
   * Places up to `limit` committed rows at the end of the chain and records a signed checkpoint of
   * the new head in the same transaction; with `floor`, nothing is placed or signed unless the chain
   * still continues it.
   */
  integrate(
    limit: number,
    sign: (checkpoint: UnsignedCheckpoint) => AuditCheckpoint,
    now: Date,
    floor?: Pick<AuditCheckpoint, 'size' | 'head' | 'timestamp'> | null,
  ): Promise<IntegratedBatch>;
  /** The newest checkpoint still kept here (some sink lacks it), or null. */
  newestStoredCheckpoint(): Promise<AuditCheckpoint | null>;
  /** Checkpoints some sink still lacks, oldest first. */
  unpublished(sinks: readonly string[], limit: number): Promise<StoredCheckpoint[]>;
  /** Marks a checkpoint as held by a sink; one that every sink holds is no longer kept. */
  markPublished(size: number, sink: string, sinks: readonly string[]): Promise<void>;
  /** The chain in `seq` order, page by page. */
  chain(pageSize?: number): AsyncGenerator<ChainedAuditEvent>;
}
