import { inStoredKeyOrder } from '../lib/stored-json.js';
import type { AuditEventInput, ProposalPatch, ProposalRecord } from './model.js';
import type { StoreTransaction } from './ports.js';

/**
 * What each step of an execution writes: the row's change and its audit row. Written by an update of
 * a stored row, or, for a proposal a rule or a grant approved at propose time, as part of the row's
 * first insert (`executeAtPropose`): the same fields and events either way.
 */
export type ExecutionStep = { patch: ProposalPatch; audit: AuditEventInput };

/** The side effect happened, its result recorded: committed, the token consumed, the lease released. Nothing in it depends on the row. */
export function committedPatch(result: unknown, now: Date): ExecutionStep['patch'] {
  // In the order the stored result reads back: the proposal this patch leaves in memory is answered
  // (the agent's commit, a woken long-poll, an MCP call) as a later read of it would be.
  return { status: 'committed', consumedAt: now, result: result == null ? null : inStoredKeyOrder(result), error: null, leaseUntil: null, updatedAt: now };
}

export function committedAudit(proposal: Pick<ProposalRecord, 'id' | 'agentId'>, result: unknown, actor: string): AuditEventInput {
  return { type: 'proposal.committed', actor, proposalId: proposal.id, agentId: proposal.agentId, data: { result: result ?? null } };
}

/** The side effect happened: the token is consumed, the result kept, the claim released. */
export function committedStep(proposal: ProposalRecord, result: unknown, actor: string, now: Date): ExecutionStep {
  return {
    // An executing proposal's attempt was counted by its claim; a local run counts its own here.
    patch: { ...committedPatch(result, now), executionAttempts: proposal.status === 'executing' ? proposal.executionAttempts : proposal.executionAttempts + 1 },
    audit: committedAudit(proposal, result, actor),
  };
}

/** The side effect failed: back to approved with the token unconsumed, so the same proposal can be retried. */
export function failedStep(proposal: ProposalRecord, message: string, actor: string, now: Date): ExecutionStep {
  return {
    patch: {
      status: 'approved',
      error: message,
      leaseUntil: null,
      executionAttempts: proposal.status === 'executing' ? proposal.executionAttempts : proposal.executionAttempts + 1,
      updatedAt: now,
    },
    audit: { type: 'execution.failed', actor, proposalId: proposal.id, agentId: proposal.agentId, data: { error: message } },
  };
}

/** A remote executor's claim: a lease, one more attempt, `execution.started`; the call runs after commit. */
export function leasedStep(proposal: ProposalRecord, leaseMs: number, actor: string, now: Date): ExecutionStep {
  return {
    patch: {
      status: 'executing',
      leaseUntil: new Date(now.getTime() + leaseMs),
      executionAttempts: proposal.executionAttempts + 1,
      updatedAt: now,
    },
    audit: { type: 'execution.started', actor, proposalId: proposal.id, agentId: proposal.agentId, data: {} },
  };
}

export async function applyStep(tx: StoreTransaction, proposal: ProposalRecord, step: ExecutionStep, now: Date): Promise<ProposalRecord> {
  const updated = tx.updateProposal(proposal, step.patch);
  await tx.appendAudit(step.audit, now);
  return updated;
}

export async function recordCommitted(tx: StoreTransaction, proposal: ProposalRecord, result: unknown, actor: string, now: Date): Promise<ProposalRecord> {
  return applyStep(tx, proposal, committedStep(proposal, result, actor, now), now);
}
