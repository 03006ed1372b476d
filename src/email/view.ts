import type { ProposalMessageView } from '../chat/types.js';
import type { AgentRecord, ApprovalRecord, ProposalRecord } from '../core/model.js';

/**
 * A proposal as the confirm page and its answer show it: the card's view, without the result (the
 * console holds it; a mail and a page reached by a link show the outcome only).
 */
export function emailView(input: {
  proposal: ProposalRecord;
  agent: AgentRecord | null;
  approvals: readonly ApprovalRecord[];
  description: string;
  publicUrl: string;
}): ProposalMessageView {
  const { proposal } = input;
  return {
    id: proposal.id,
    operation: proposal.operation,
    description: input.description,
    summary: proposal.summary,
    agent: input.agent?.name ?? proposal.agentId,
    confirmationType: proposal.confirmationType,
    cost: proposal.cost,
    expiresAt: proposal.expiresAt,
    status: proposal.status,
    quorum: proposal.quorum,
    approvals: input.approvals.map((approval) => ({ approver: approval.approver, at: approval.at })),
    decision: proposal.decidedBy && proposal.decidedAt ? { by: proposal.decidedBy, at: proposal.decidedAt, reason: proposal.decisionReason } : null,
    result: null,
    error: null,
    reminders: proposal.reminders,
    escalatedAt: proposal.escalatedAt,
    grantDurationsMs: [],
    consoleUrl: new URL(`/console/proposals/${proposal.id}`, input.publicUrl).toString(),
    trail: [],
  };
}
