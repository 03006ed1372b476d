import { previewDecision } from '../core/decision-preview.js';
import { boundsFrom } from '../core/grants.js';
import { operationFor, type AgentRecord, type ApprovalRecord, type Decider, type ProposalRecord } from '../core/model.js';
import { isFailedExecution } from '../core/outcome.js';
import { requiresPasskey } from '../core/step-up.js';
import type { ConsoleQueries, ConsoleServices } from './ports.js';
import type { Eligibility, ProposalItem } from './views/proposal-item.js';

const PENDING_LIMIT = 200;

/** Proposals as the viewer sees them: agent names, approvals, and which buttons the core allows. */
export function proposalItems(services: ConsoleServices, queries: ConsoleQueries) {
  /** The core's preview for the viewer: which button to show, or the reason there is none. */
  function eligibility(decider: Decider, proposal: ProposalRecord, agent: AgentRecord | undefined, approvals: ApprovalRecord[]): Eligibility {
    const configured = services.operation(proposal.operation);
    const facts = {
      proposalId: proposal.id,
      proposal,
      operation: configured ? operationFor(proposal, configured) : undefined,
      agent: agent ?? null,
      approvals,
      decider,
      now: services.clock(),
      people: services.people,
      showName: (name: string) => name,
    };
    if (isFailedExecution(proposal)) {
      const retry = previewDecision({ ...facts, action: 'retry' });
      return retry.allowed ? { can: true, approved: false } : { can: false, why: retry.message };
    }
    const approve = previewDecision({ ...facts, action: 'approve' });
    if (approve.allowed) return { can: true, approved: false };
    return approve.code === 'already_counted' ? { can: true, approved: true } : { can: false, why: approve.message };
  }

  async function itemsFor(proposals: ProposalRecord[], viewer: Decider): Promise<ProposalItem[]> {
    const agents = new Map((await services.agents.list()).map((agent) => [agent.id, agent]));
    const approvals = await queries.approvalsOf(proposals.map((p) => p.id));
    return proposals.map((proposal) => {
      const agent = agents.get(proposal.agentId);
      const list = approvals.get(proposal.id) ?? [];
      const operation = services.operation(proposal.operation);
      return {
        proposal,
        agentName: agent?.name ?? proposal.agentId,
        description: operation ? `${operation.description} (${operation.name})` : proposal.operation,
        approvals: list,
        eligibility: eligibility(viewer, proposal, agent, list),
        grantDurationsMs: operation?.grants?.allow ? operation.grants.durationsMs : [],
        grantBounds: operation?.grants?.allow ? boundsFrom(proposal.params, operation.paramsSchema) : [],
        stepUp: operation ? requiresPasskey(operation, proposal) : false,
      };
    });
  }

  async function pendingItems(viewer: Decider) {
    const now = services.clock().getTime();
    // The sweeper marks expired proposals within a second; until then they are no longer decidable.
    const pending = (await services.store.listProposals({ status: 'pending', limit: PENDING_LIMIT }))
      .filter((p) => p.expiresAt.getTime() > now)
      .sort((a, b) => a.expiresAt.getTime() - b.expiresAt.getTime());
    const failed = (await services.store.listProposals({ status: 'approved', limit: 50 })).filter(isFailedExecution);
    return { items: await itemsFor(pending, viewer), failed: await itemsFor(failed, viewer) };
  }

  return { itemsFor, pendingItems };
}

export type ProposalItems = ReturnType<typeof proposalItems>;
