import { isAutomaticDecider, type ApprovalRecord, type ProposalRecord } from './model.js';

/**
 * The one answer every agent-facing surface gives about a decision (v1, callbacks, AGP, MCP, SDK,
 * framework adapters). Agents, and the language models behind them, read `outcome`, `userConsent`
 * and `retryable`; they must never have to reconstruct consent from a status and an error field.
 * Silence is never consent: a proposal nobody decided ends `expired`, with `userConsent: false`.
 */
/** Every outcome an agent can read, the one list (the API's zod enum and the MCP output schema use it). */
export const OUTCOME_KINDS = ['pending', 'approved', 'committed', 'denied', 'expired', 'cancelled', 'failed'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

export interface Outcome {
  outcome: OutcomeKind;
  /** A human (or a rule a human wrote) said yes to exactly this proposal. */
  userConsent: boolean;
  /**
   * Asking again is the right move: `pending` (the same call returns the same proposal, never a
   * second request to a human) and `failed` (the approved execution can run again). Never for a
   * denial or an expiry: the answer there is final.
   */
  retryable: boolean;
  reason: string | null;
  decidedBy: string[];
  proposalId: string;
}

/**
 * "Approved with an error": the execution failed and the proposal went back to approved, token
 * unconsumed, ready to be retried. The one test for it; every surface asks this rather than
 * reading `status` and `error` itself.
 */
export function isFailedExecution(proposal: { status: ProposalRecord['status']; error: string | null }): boolean {
  return proposal.status === 'approved' && proposal.error !== null;
}

export function outcomeOf(proposal: ProposalRecord, approvals: readonly ApprovalRecord[]): Outcome {
  // A policy rule or a grant that decided alone is named as the decider.
  const approvers =
    approvals.length > 0
      ? approvals.map((approval) => approval.approver)
      : proposal.decidedBy && isAutomaticDecider(proposal.decidedBy)
        ? [proposal.decidedBy]
        : [];
  const base = { proposalId: proposal.id };
  switch (proposal.status) {
    case 'pending':
      return { ...base, outcome: 'pending', userConsent: false, retryable: true, reason: null, decidedBy: approvers };
    case 'approved':
    case 'executing':
      if (isFailedExecution(proposal)) {
        return { ...base, outcome: 'failed', userConsent: true, retryable: true, reason: proposal.error, decidedBy: approvers };
      }
      return { ...base, outcome: 'approved', userConsent: true, retryable: false, reason: proposal.decisionReason, decidedBy: approvers };
    case 'committed':
      return { ...base, outcome: 'committed', userConsent: true, retryable: false, reason: proposal.decisionReason, decidedBy: approvers };
    case 'rejected':
      return {
        ...base,
        outcome: 'denied',
        userConsent: false,
        retryable: false,
        reason: proposal.decisionReason,
        decidedBy: proposal.decidedBy ? [proposal.decidedBy] : [],
      };
    case 'expired':
      return { ...base, outcome: 'expired', userConsent: false, retryable: false, reason: 'nobody decided before the request expired', decidedBy: [] };
    case 'cancelled':
      return {
        ...base,
        outcome: 'cancelled',
        userConsent: false,
        retryable: false,
        reason: proposal.decisionReason,
        decidedBy: proposal.decidedBy ? [proposal.decidedBy] : [],
      };
  }
}
