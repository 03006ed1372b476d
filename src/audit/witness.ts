import type { KeyObject } from 'node:crypto';
import { indexCheckpoints, type AuditCheckpoint, type CheckpointIndex } from '../core/audit-chain.js';
import type { AuditLog } from './ports.js';
import { readNewestCheckpoint } from './sinks.js';

export interface CheckpointWitnessOptions {
  /** The directory sink's directory: the copy outside the database. */
  dir: string;
  log: Pick<AuditLog, 'newestStoredCheckpoint'>;
  /** The keys a checkpoint must verify with: the pinned ones (`TWOKEY_AUDIT_PUBLIC_KEY`), else the signer's own. */
  trustedKeys: readonly KeyObject[];
}

/**
 * Remembers the newest signed checkpoint, as a transparency log's witness does: what this process
 * signed, the newest line of the checkpoint directory, and the newest one still waiting in the
 * database to be published. The integrator refuses to sign anything that does not continue it; the
 * console's "intact" means the chain matches it, not only that each row links to the one before.
 */
export function createCheckpointWitness(options: CheckpointWitnessOptions) {
  let remembered: AuditCheckpoint | null = null;

  /** The newest checkpoint of each source, oldest first; a source that cannot be read is left out. */
  async function candidates(onUnreadable?: (source: string, error: unknown) => void): Promise<AuditCheckpoint[]> {
    const read = async (source: string, load: () => Promise<AuditCheckpoint | null>) => {
      try {
        return await load();
      } catch (error) {
        onUnreadable?.(source, error);
        return null;
      }
    };
    const found = [
      remembered,
      await read('checkpoint directory', () => readNewestCheckpoint(options.dir)),
      await read('database', () => options.log.newestStoredCheckpoint()),
    ].filter((checkpoint): checkpoint is AuditCheckpoint => checkpoint !== null);
    const distinct = new Map(found.map((checkpoint) => [`${checkpoint.size}:${checkpoint.head}:${checkpoint.signature}`, checkpoint]));
    return [...distinct.values()].sort((a, b) => a.size - b.size);
  }

  return {
    /** Called for every checkpoint this process signs. */
    remember(checkpoint: AuditCheckpoint): void {
      if (!remembered || checkpoint.size >= remembered.size) remembered = checkpoint;
    },
    /**
     * The newest checkpoint that verifies with the trusted keys: the floor the next signature must
     * continue. One that does not verify (a key since rotated, a forged line) is no floor.
     */
    async floor(onUnreadable?: (source: string, error: unknown) => void): Promise<AuditCheckpoint | null> {
      const trusted = (await candidates(onUnreadable)).filter((checkpoint) => indexCheckpoints([checkpoint], options.trustedKeys).ok);
      return trusted.at(-1) ?? null;
    },
    /**
     * The newest checkpoints, checked against the trusted keys and each other, for a verdict over
     * the chain (`verifyAuditChain`); null when none has been signed yet.
     */
    async index(): Promise<CheckpointIndex | null> {
      const found = await candidates();
      return found.length === 0 ? null : indexCheckpoints(found, options.trustedKeys);
    },
  };
}

export type CheckpointWitness = ReturnType<typeof createCheckpointWitness>;
