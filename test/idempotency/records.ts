import type { OpenExecuteRecord } from '../../src/agp/ports.js';
import { sha256Hex } from '../../src/core/secrets.js';

/**
 * What an `open` AGP execute hands to its key's outcome: its audit row and one token its business
 * minted, both carrying `transactionId` so a test can find them again.
 */
export function openExecuteRecord(options: {
  agentId: string;
  agentName: string;
  transactionId: string;
  at: Date;
  expiresAt: Date;
  /** The minted token's hash; by default derived from the transaction, so unique. */
  tokenHash?: string;
}): OpenExecuteRecord {
  const { agentId, agentName, transactionId, at, expiresAt } = options;
  return {
    event: { type: 'agp.executed', actor: `agent:${agentName}`, agentId, data: { transactionId } },
    at,
    minted: [
      {
        tokenHash: options.tokenHash ?? sha256Hex(transactionId),
        kind: 'adapter',
        agentId,
        businessId: 'echo',
        requestHash: sha256Hex('binding'),
        proposalId: null,
        data: { transactionId },
        createdAt: at,
        expiresAt,
        consumedAt: null,
      },
    ],
  };
}
