import { TwokeyError } from './errors.js';
import { boundsFrom, countedGrantors, grantState, type GrantFilter, type GrantRecord, type GrantTerms, type GrantWithApprovals } from './grants.js';
import { newId } from './ids.js';
import { approversOf, operationFor, type Clock, type Decider, type OperationSpec } from './model.js';
import type { Store } from './ports.js';
import { matchApprover } from './decision-preview.js';
import type { DecisionResult, ProposalService } from './proposals.js';

export interface GrantServiceDeps {
  store: Store;
  clock: Clock;
  operation(name: string): OperationSpec | undefined;
  proposals: Pick<ProposalService, 'approve'>;
  grants: { list(filter: GrantFilter): Promise<GrantWithApprovals[]>; get(id: string): Promise<GrantWithApprovals | null> };
}

export interface GrantRequest {
  durationMs: number;
  maxUses?: number | null;
  /** Numbers up to this proposal's values, everything else equal to them. */
  bounded?: boolean;
}

const MAX_USES = 10_000;

/**
 * "Approve, and approve the same for 1 h": the approval counts as any other; the grant is created
 * (or, for a quorum of two, joined) by the same person in a transaction of its own, and becomes
 * active once as many distinct approvers as the proposal needed have granted it.
 */
export function createGrantService(deps: GrantServiceDeps) {
  const { store, clock } = deps;

  function termsFor(operation: OperationSpec, request: GrantRequest): GrantTerms {
    const settings = operation.grants;
    if (!settings?.allow) throw new TwokeyError('invalid_request', `operation "${operation.name}" does not allow grants`);
    if (!Number.isSafeInteger(request.durationMs) || request.durationMs <= 0 || request.durationMs > settings.maxDurationMs) {
      throw new TwokeyError('invalid_request', `a grant of "${operation.name}" lasts at most ${settings.maxDurationMs / 60_000} minutes`);
    }
    const maxUses = request.maxUses ?? null;
    if (maxUses !== null && (!Number.isSafeInteger(maxUses) || maxUses < 1 || maxUses > MAX_USES)) {
      throw new TwokeyError('invalid_request', `uses must be a whole number from 1 to ${MAX_USES}`);
    }
    return { durationMs: request.durationMs, maxUses, bounded: request.bounded ?? false };
  }

  async function approveAndGrant(proposalId: string, decider: Decider, request: GrantRequest): Promise<DecisionResult & { grant: GrantRecord }> {
    const existing = await store.getProposal(proposalId);
    if (!existing) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    const configured = deps.operation(existing.operation);
    if (!configured) throw new TwokeyError('operation_removed', `operation "${existing.operation}" is no longer in the configuration`);
    const terms = termsFor(configured, request);
    // The approval first, with every rule of a click; the grant only from someone whose approval counted.
    const decision = await deps.proposals.approve(proposalId, decider);
    const now = clock();
    const grant = await store.transaction(async (tx) => {
      const proposal = await tx.lockProposal(proposalId);
      if (!proposal) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
      const operation = operationFor(proposal, configured);
      const agent = await tx.getAgent(proposal.agentId);
      if (!agent) throw new TwokeyError('internal', 'proposal without agent');
      // The approval above passed every rule of a click (owner, approver, people); it must still stand.
      if (!matchApprover(operation.approval.approvers, decider))
        throw new TwokeyError('not_an_approver', `${decider.identity} is not an approver of "${operation.name}"`);
      const approvals = await tx.listApprovals(proposal.id);
      if (!approvals.some((a) => a.approver === decider.identity)) {
        throw new TwokeyError('not_pending', `proposal ${proposal.id} is ${proposal.status}; a grant comes with an approval`);
      }
      let grant = await tx.grants.findForProposal(proposal.id, terms);
      const created = !grant;
      if (!grant) {
        grant = await tx.grants.insert({
          id: newId('grt'),
          operation: proposal.operation,
          agentId: proposal.agentId,
          sourceProposalId: proposal.id,
          quorum: proposal.quorum,
          bounds: terms.bounded ? boundsFrom(proposal.params, configured.paramsSchema) : [],
          maxUses: terms.maxUses,
          uses: 0,
          durationMs: terms.durationMs,
          createdBy: decider.identity,
          createdAt: now,
          expiresAt: new Date(now.getTime() + terms.durationMs),
          activatedAt: null,
          revokedAt: null,
          revokedBy: null,
        });
      }
      const matchedRule = matchApprover(approversOf(proposal, configured), decider) ?? decider.identity;
      const added = await tx.grants.addApproval({ grantId: grant.id, approver: decider.identity, matchedRule, via: decider.via, at: now });
      if (added) {
        await tx.appendAudit(
          {
            type: created ? 'grant.created' : 'grant.approved',
            actor: decider.identity,
            proposalId: proposal.id,
            agentId: proposal.agentId,
            data: {
              grantId: grant.id,
              operation: grant.operation,
              expiresAt: grant.expiresAt.toISOString(),
              maxUses: grant.maxUses,
              bounds: grant.bounds,
              quorum: grant.quorum,
            },
          },
          now,
        );
      }
      const grantors = countedGrantors(await tx.grants.listApprovals(grant.id), approversOf(proposal, configured), agent.owners);
      if (!grant.activatedAt && grantors.length >= grant.quorum) {
        grant = await tx.grants.update(grant.id, { activatedAt: now });
        await tx.appendAudit(
          {
            type: 'grant.activated',
            actor: decider.identity,
            proposalId: proposal.id,
            agentId: proposal.agentId,
            data: { grantId: grant.id, grantedBy: grantors },
          },
          now,
        );
      }
      return grant;
    });
    return { ...decision, grant };
  }

  async function revoke(grantId: string, by: string): Promise<GrantRecord> {
    const now = clock();
    return store.transaction(async (tx) => {
      // The row lock orders this against a use in flight: that use committed before, or sees the revocation.
      const grant = await tx.grants.lock(grantId);
      if (!grant) throw new TwokeyError('not_found', `no grant ${grantId}`);
      if (grant.revokedAt) throw new TwokeyError('not_pending', `grant ${grantId} was already revoked`);
      const revoked = await tx.grants.update(grant.id, { revokedAt: now, revokedBy: by });
      await tx.appendAudit(
        {
          type: 'grant.revoked',
          actor: by,
          proposalId: grant.sourceProposalId,
          agentId: grant.agentId,
          data: { grantId: grant.id, uses: grant.uses, state: grantState(grant, now) },
        },
        now,
      );
      return revoked;
    });
  }

  /** Who may revoke from the console: an approver of the grant's operation. */
  function mayRevoke(grant: GrantRecord, decider: Decider): boolean {
    const operation = deps.operation(grant.operation);
    return operation !== undefined && matchApprover(operation.approval.approvers, decider) !== null;
  }

  return { approveAndGrant, revoke, mayRevoke, list: deps.grants.list, get: deps.grants.get };
}

export type GrantService = ReturnType<typeof createGrantService>;
