import { explainVerdict } from '../policy/explain.js';
import { countWindowsOf, evaluatePolicy, type PolicyVerdict } from '../policy/rules.js';
import { grantCovers, grantDecider, type GrantRecord } from './grants.js';
import { approversOf, type AgentRecord, type OperationSpec, type ProposalRecord } from './model.js';
import type { AuditEventInput } from './model.js';
import type { StoreTransaction } from './ports.js';

/**
 * Decisions nobody has to click: policy rules and grants, applied at propose time inside the
 * transaction that inserts the proposal, so the proposal, its decision and their audit rows commit
 * together (or not at all). They decide the proposal before its row is written: the row is inserted
 * once, as decided, instead of inserted and then updated.
 *
 * Lock order: a grant's row lock is taken before the audit chain's lock in every transaction that
 * touches grants (here, revocation, granting), so a use racing a revocation waits instead of
 * deadlocking. Hence the audit rows are returned, for the caller to append after its own.
 */

export interface ProposeContext {
  proposal: ProposalRecord;
  agent: AgentRecord;
  operation: OperationSpec;
  now: Date;
}

/** The verdict of the rules for one would-be proposal; reads `count_last` windows from the transaction. */
export async function policyVerdict(
  counter: Pick<StoreTransaction, 'countRecentProposals'>,
  context: { agent: AgentRecord; operation: OperationSpec; params: Record<string, unknown>; proposalId: string; now: Date },
): Promise<PolicyVerdict> {
  const rules = context.operation.policy ?? [];
  const recentCounts = new Map<number, number>();
  for (const windowMs of countWindowsOf(rules)) {
    const since = new Date(context.now.getTime() - windowMs);
    recentCounts.set(windowMs, await counter.countRecentProposals(context.agent.id, context.operation.name, since, context.proposalId));
  }
  return evaluatePolicy(rules, { agent: context.agent.name, operation: context.operation.name, params: context.params, recentCounts });
}

/** Whether the operation's rules count the agent's recent proposals (`count_last`), read in the proposal's transaction. */
export const countsRecentProposals = (operation: OperationSpec): boolean => countWindowsOf(operation.policy ?? []).length > 0;

type AuditSink = (type: string, actor: string, data: Record<string, unknown>) => void;

/** A decision by policy, recorded like a person's: status, decider, reason and its audit row. */
function decide(
  context: ProposeContext,
  audit: AuditSink,
  decision: { kind: 'approve' | 'deny'; decider: string; reason: string; details: Record<string, unknown> },
): ProposalRecord {
  const decided: ProposalRecord = {
    ...context.proposal,
    status: decision.kind === 'approve' ? 'approved' : 'rejected',
    decidedBy: decision.decider,
    decidedAt: context.now,
    decisionReason: decision.reason,
    updatedAt: context.now,
  };
  audit(decision.kind === 'approve' ? 'proposal.approved' : 'proposal.rejected', decision.decider, {
    via: 'policy',
    ...decision.details,
    reason: decision.reason,
  });
  return decided;
}

async function decideByPolicy(tx: StoreTransaction, context: ProposeContext, audit: AuditSink): Promise<{ proposal: ProposalRecord; grantsMayApply: boolean }> {
  const { proposal, agent, operation, now } = context;
  // A standing rule of the operation itself (an MCP upstream's read-only tool): it always matches.
  if (operation.autoApprove) {
    const { decider, reason } = operation.autoApprove;
    return { proposal: decide(context, audit, { kind: 'approve', decider, reason, details: {} }), grantsMayApply: false };
  }
  if (!operation.policy || operation.policy.length === 0) return { proposal, grantsMayApply: true };
  const verdict = await policyVerdict(tx, { agent, operation, params: proposal.params, proposalId: proposal.id, now });
  // The same explanation `twokey policy test` prints: what is recorded here is what it shows.
  const explained = explainVerdict(verdict, operation.name, { quorum: proposal.quorum, approvers: operation.approval.approvers });
  switch (explained.kind) {
    case 'none':
      return { proposal, grantsMayApply: true };
    case 'fallback':
      // Fail closed: the proposal waits for the operation's normal approval; no grant stands in.
      audit('policy.error', 'system', { rule: explained.rule.path, when: explained.rule.when, error: explained.error, fallback: 'require' });
      return { proposal, grantsMayApply: false };
    case 'require': {
      audit('policy.required', explained.decidedBy, {
        rule: explained.rule.path,
        when: explained.rule.when,
        reason: explained.reason,
        quorum: explained.quorum,
        approvers: explained.approvers,
        ...(explained.changes.stepUp ? { stepUp: explained.changes.stepUp } : {}),
      });
      const updated: ProposalRecord = { ...proposal, ...explained.changes };
      // A grant never stands in for a passkey the rule asked for.
      return { proposal: updated, grantsMayApply: explained.changes.stepUp === undefined };
    }
    case 'approve':
    case 'deny': {
      const decided = decide(context, audit, {
        kind: explained.decision,
        decider: explained.decidedBy,
        reason: explained.reason,
        details: { rule: explained.rule.path, when: explained.rule.when },
      });
      return { proposal: decided, grantsMayApply: false };
    }
  }
}

async function decideByGrant(tx: StoreTransaction, context: ProposeContext, audit: AuditSink): Promise<ProposalRecord> {
  const { proposal, agent, operation, now } = context;
  if (!operation.grants?.allow) return proposal;
  const candidates = await tx.grants.listUsable(agent.id, operation.name, now);
  const coverage = { params: proposal.params, quorum: proposal.quorum, approvers: approversOf(proposal, operation), owners: agent.owners };
  for (const candidate of candidates) {
    if (!grantCovers(candidate, coverage, now)) continue;
    // Another proposal may have spent the last use since the list was read: then try the next.
    const spent: GrantRecord | null = await tx.grants.spendUse(candidate.grant.id, now);
    if (!spent) continue;
    const decider = grantDecider(spent);
    const grantors = candidate.approvals.map((a) => a.approver);
    const reason = `covered by a grant from ${grantors.join(', ')} until ${spent.expiresAt.toISOString()}`;
    const decided: ProposalRecord = { ...proposal, status: 'approved', decidedBy: decider, decidedAt: now, decisionReason: reason, updatedAt: now };
    audit('grant.used', decider, { grantId: spent.id, uses: spent.uses, maxUses: spent.maxUses });
    audit('proposal.approved', decider, { via: 'grant', grantId: spent.id, grantedBy: grantors });
    return decided;
  }
  return proposal;
}

/**
 * Everything automatic at propose time, in the proposal's own transaction and before its row is
 * inserted (`context.proposal` is the row to be): policy rules first (the
 * first match decides), then, for a proposal still waiting, `beforeWaiting` and a grant that covers it. (The follow-ups of a proposal still
 * waiting for people are queued with its other effects, by `jobsForChange` in effects.ts.)
 */
export async function decideAtPropose(
  tx: StoreTransaction,
  context: ProposeContext,
  /**
   * Runs when no rule decided, before grants are tried: the limit of proposals waiting for a
   * decision, which a proposal a rule has just decided never joins (so it costs that one nothing).
   */
  beforeWaiting: () => Promise<void> = async () => {},
): Promise<{ proposal: ProposalRecord; audit: AuditEventInput[] }> {
  const events: AuditEventInput[] = [];
  const audit: AuditSink = (type, actor, data) => events.push({ type, actor, proposalId: context.proposal.id, agentId: context.agent.id, data });
  const byPolicy = await decideByPolicy(tx, context, audit);
  let proposal = byPolicy.proposal;
  if (proposal.status !== 'pending') return { proposal, audit: events };
  await beforeWaiting();
  if (byPolicy.grantsMayApply) proposal = await decideByGrant(tx, { ...context, proposal }, audit);
  return { proposal, audit: events };
}
