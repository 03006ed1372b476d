import type { ApprovalRecord } from './model.js';
import { canonicalJson } from './secrets.js';

/**
 * Grants: an approver's "approve, and approve the same for this agent for 1 h" — optionally
 * bounded by a number of uses and by the params of the proposal it was given on. Pure rules here;
 * storage behind GrantTransaction; the propose and approve paths use them in their transactions.
 */

export interface GrantBound {
  param: string;
  /** `eq`: the same value; `lte`: a number at most this one; `absent`: not given at all (`value` is null). */
  op: 'eq' | 'lte' | 'absent';
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

/** The params an operation's schema names at its top level. */
export function declaredParams(paramsSchema: Record<string, unknown>): string[] {
  const properties = paramsSchema['properties'];
  return typeof properties === 'object' && properties !== null && !Array.isArray(properties) ? Object.keys(properties) : [];
}

/**
 * Bounds taken from the proposal a grant is given on: numbers up to its value, anything else equal,
 * and every declared param it did not have absent. Absent, not "absent or the schema's default":
 * twokey hands an executor exactly the params proposed, and an executor may treat a field it was not
 * given (leave as is) differently from the same field set to its default value.
 */
export function boundsFrom(params: Record<string, unknown>, paramsSchema: Record<string, unknown>): GrantBound[] {
  const given = Object.entries(params).map(([param, value]): GrantBound =>
    typeof value === 'number' && Number.isFinite(value) ? { param, op: 'lte', value } : { param, op: 'eq', value },
  );
  const absent = declaredParams(paramsSchema)
    .filter((param) => !Object.hasOwn(params, param))
    .map((param): GrantBound => ({ param, op: 'absent', value: null }));
  return [...given, ...absent];
}

/** A bound as people read it: `amount_cents ≤ 100`, `to = "acme"`, `memo absent`. */
export function describeBound(bound: GrantBound): string {
  switch (bound.op) {
    case 'lte':
      return `${bound.param} ≤ ${JSON.stringify(bound.value)}`;
    case 'absent':
      return `${bound.param} absent`;
    default:
      return `${bound.param} = ${JSON.stringify(bound.value)}`;
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  return a !== undefined && b !== undefined && canonicalJson(a) === canonicalJson(b);
}

/**
 * Whether params stay within a bounded grant's bounds (no bounds: any params). A param no bound
 * names is outside them, whatever the bounds say about the others: a grant covers only what its
 * approver saw, and grants stored before `absent` bounds existed named only the params given.
 */
export function withinBounds(bounds: readonly GrantBound[], params: Record<string, unknown>): boolean {
  if (bounds.length === 0) return true;
  const named = new Set(bounds.map((bound) => bound.param));
  if (Object.keys(params).some((param) => !named.has(param))) return false;
  return bounds.every((bound) => {
    const given = Object.hasOwn(params, bound.param);
    const value = given ? params[bound.param] : undefined;
    if (bound.op === 'absent') return !given;
    if (bound.op === 'lte') return typeof value === 'number' && typeof bound.value === 'number' && value <= bound.value;
    return given && sameJson(value, bound.value);
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
