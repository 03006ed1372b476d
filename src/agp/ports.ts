import type { AgentService } from '../core/agents.js';
import type { AuditEventInput } from '../core/model.js';
import type { ProposalService } from '../core/proposals.js';

/** A row of `agp_tokens`: a gateway token from /agp/execute/prepare, or an adapter's own token. */
export interface AgpTokenRecord {
  tokenHash: string;
  kind: 'gateway' | 'adapter';
  agentId: string;
  businessId: string;
  /** Gateway: SHA-256 of the canonical request. Adapter: SHA-256 of what the adapter bound it to. */
  requestHash: string;
  /** Set when a human approves this execute through a proposal. */
  proposalId: string | null;
  data: Record<string, unknown> | null;
  createdAt: Date;
  expiresAt: Date;
  consumedAt: Date | null;
}

export interface TokenEffects {
  /** Merged into the row's `data` (the execution record). */
  data?: Record<string, unknown>;
  /** Appended to the audit chain in the same transaction. */
  audit?: AuditEventInput;
}

/**
 * What an `open` execute leaves behind once its business has answered: its audit row and the tokens
 * the business minted, written together in one statement (with the Idempotency-Key's outcome when
 * the request has one).
 */
export interface OpenExecuteRecord {
  event: AuditEventInput;
  at: Date;
  minted: readonly AgpTokenRecord[];
}

export interface AgpTokenStore {
  insert(record: AgpTokenRecord, effects?: TokenEffects): Promise<void>;
  find(tokenHash: string, kind: AgpTokenRecord['kind']): Promise<AgpTokenRecord | null>;
  /**
   * One transaction: locks the row, runs `verify` (which throws to refuse), marks the token consumed
   * and writes `effects`. Two concurrent consumers of one token: the second sees it consumed.
   */
  consume(
    tokenHash: string,
    kind: AgpTokenRecord['kind'],
    at: Date,
    verify: (record: AgpTokenRecord | null) => void,
    effects?: TokenEffects,
  ): Promise<AgpTokenRecord>;
  /** Records the execution's outcome; `release` makes the token usable again (the execution did not happen). */
  finish(tokenHash: string, at: Date, effects: TokenEffects & { release: boolean }): Promise<void>;
  /** The record of an execute that ran without a token (policy `open`): one statement. */
  recordOpenExecute(record: OpenExecuteRecord): Promise<void>;
  /** Removes tokens that expired before `before`; returns how many. */
  deleteExpired(before: Date): Promise<number>;
}

/**
 * What /agp needs from the rest of twokey besides its own store, declared here so the runtime (or a
 * test) hands in exactly this rather than its whole set of services.
 */
export interface AgpServices {
  agents: Pick<AgentService, 'authenticate'>;
  proposals: Pick<ProposalService, 'propose' | 'commitWithApprovals' | 'cancel' | 'get'>;
}
