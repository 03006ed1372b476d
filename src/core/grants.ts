import type { ApprovalRecord } from './model.js';

/**
 * Grants: an approver's "approve, and approve the same for this agent for 1 h" — optionally
 * bounded by a number of uses and by the params of the proposal it was given on. Pure rules here;
 * storage behind GrantTransaction; the propose and approve paths use them in their transactions.
 */

export interface GrantBound {
  param: string;
  /** `eq`: the same value; `lte`: a number at most this one. */
  op: 'eq' | 'lte';
  value: unknown;
}

export interface GrantRecord {
  id: string;
  operation: string;
  agentId: string;
  sourceProposalId: string | null;
  /** Distinct approvers who must grant it before it covers anything. */
  quorum: number;
  bounds: GrantBound[];
  maxUses: number | null;
  uses: number;
  durationMs: number;
  createdBy: string;
  createdAt: Date;
  expiresAt: Date;
  activatedAt: Date | null;
  revokedAt: Date | null;
  revokedBy: string | null;
}

export type GrantApprovalRecord = Omit<ApprovalRecord, 'proposalId'> & { grantId: string };

export interface GrantWithApprovals {
  grant: GrantRecord;
  approvals: GrantApprovalRecord[];
}

/** Grant storage inside one transaction. */
export interface GrantTransaction {
  /** Active, unexpired, unrevoked grants of this agent and operation with uses left, soonest expiry first. */
  listUsable(agentId: string, operation: string, now: Date): Promise<GrantWithApprovals[]>;
  /**
   * Spends one use if the grant is still usable at `now`: one conditional update, so concurrent
   * proposals cannot overspend it and a revocation committed first wins. null when it was not.
   */
  spendUse(id: string, now: Date): Promise<GrantRecord | null>;
  /** The grant, row-locked until the transaction ends. */
  lock(id: string): Promise<GrantRecord | null>;
  /** An unrevoked grant given on this proposal with these terms, row-locked: a second approver joins it. */
  findForProposal(proposalId: string, terms: GrantTerms): Promise<GrantRecord | null>;
  insert(grant: GrantRecord): Promise<GrantRecord>;
  /** false when this approver already granted it. */
  addApproval(approval: GrantApprovalRecord): Promise<boolean>;
  listApprovals(grantId: string): Promise<GrantApprovalRecord[]>;
  update(id: string, patch: Partial<Pick<GrantRecord, 'activatedAt' | 'revokedAt' | 'revokedBy'>>): Promise<GrantRecord>;
}

export interface GrantTerms {
  durationMs: number;
  maxUses: number | null;
  /** Bound numeric params to at most this proposal's values, the others to equal them. */
  bounded: boolean;
}

export interface GrantFilter {
  agentId?: string;
  operation?: string;
  /** Only grants that could still cover something at this instant. */
  activeAt?: Date;
  limit?: number;
}

/** `grant:<id>`: the decider a proposal covered by a grant is recorded under. */
export const grantDecider = (grant: Pick<GrantRecord, 'id'>): string => `grant:${grant.id}`;

/** Bounds taken from the proposal a grant is given on: numbers up to its value, anything else equal. */
export function boundsFrom(params: Record<string, unknown>): GrantBound[] {
  return Object.entries(params).map(([param, value]) =>
    typeof value === 'number' && Number.isFinite(value) ? { param, op: 'lte' as const, value } : { param, op: 'eq' as const, value },
  );
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export function withinBounds(bounds: readonly GrantBound[], params: Record<string, unknown>): boolean {
  return bounds.every((bound) => {
    const value = params[bound.param];
    if (bound.op === 'lte') return typeof value === 'number' && typeof bound.value === 'number' && value <= bound.value;
    return sameJson(value, bound.value);
  });
}

export function isUsable(grant: GrantRecord, now: Date): boolean {
  return (
    grant.activatedAt !== null &&
    grant.revokedAt === null &&
    now.getTime() < grant.expiresAt.getTime() &&
    (grant.maxUses === null || grant.uses < grant.maxUses)
  );
}

/**
 * Grantors who still count for a proposal, as approvals do at commit: their approvers-list entry is
 * on the list this proposal uses, and none is an owner of the agent.
 */
export function countedGrantors(approvals: readonly GrantApprovalRecord[], approvers: readonly string[], owners: readonly string[]): string[] {
  return approvals.filter((a) => approvers.includes(a.matchedRule) && !owners.includes(a.approver)).map((a) => a.approver);
}

/** Whether this grant lets a new proposal with these params through without asking anyone. */
export function grantCovers(
  entry: GrantWithApprovals,
  proposal: { params: Record<string, unknown>; quorum: number; approvers: readonly string[]; owners: readonly string[] },
  now: Date,
): boolean {
  return (
    isUsable(entry.grant, now) &&
    withinBounds(entry.grant.bounds, proposal.params) &&
    countedGrantors(entry.approvals, proposal.approvers, proposal.owners).length >= Math.max(proposal.quorum, entry.grant.quorum)
  );
}

export type GrantState = 'waiting' | 'active' | 'used_up' | 'expired' | 'revoked';

export function grantState(grant: GrantRecord, now: Date): GrantState {
  if (grant.revokedAt) return 'revoked';
  if (now.getTime() >= grant.expiresAt.getTime()) return 'expired';
  if (grant.maxUses !== null && grant.uses >= grant.maxUses) return 'used_up';
  return grant.activatedAt ? 'active' : 'waiting';
}
