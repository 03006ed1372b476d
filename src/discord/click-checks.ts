import { NOTHING_CHANGED, previewDecision, type DecisionAction } from '../core/decision-preview.js';
import { TwokeyError } from '../core/errors.js';
import { operationFor, type Decider, type ProposalRecord } from '../core/model.js';
import type { DiscordAction } from './message.js';
import type { DiscordServices } from './ports.js';
import { explainRefusal } from './private-replies.js';

/** "Approve for…" is an approval first: every rule of Approve applies to it. */
const decisionOf = (action: DiscordAction): DecisionAction => (action === 'grant' ? 'approve' : action);

/** What a click may do, read before answering it; the core checks everything again when it decides. */
export function createClickChecks(services: DiscordServices) {
  /** The durations "Approve for…" offers on this operation; throws the refusal when it offers none. */
  function grantDurations(operationName: string): number[] {
    const settings = services.operation(operationName)?.grants;
    if (!services.grants || !settings?.allow || settings.durationsMs.length === 0) {
      throw new TwokeyError('invalid_request', 'This operation does not allow approving for a while');
    }
    return settings.durationsMs;
  }

  /**
   * The core's decision preview, read without locks, so a refusal can be the interaction's own
   * (ephemeral) response. The core checks again under the row lock; this only decides the reply.
   */
  async function checkClick(action: DiscordAction, proposalId: string, decider: Decider): Promise<{ refusal: string | null; proposal: ProposalRecord | null }> {
    const proposal = await services.store.getProposal(proposalId);
    const preview = await previewFor(decisionOf(action), proposalId, proposal, decider);
    if (!preview.allowed) return { refusal: `${preview.message} ${NOTHING_CHANGED}`, proposal };
    if (action === 'grant' && proposal) {
      try {
        grantDurations(proposal.operation);
      } catch (error) {
        return { refusal: explainRefusal(error, 'approve'), proposal };
      }
    }
    return { refusal: null, proposal };
  }

  async function previewFor(action: DecisionAction, proposalId: string, proposal: ProposalRecord | null, decider: Decider) {
    const configured = proposal ? services.operation(proposal.operation) : undefined;
    // Escalation may have added approvers to this proposal.
    const operation = proposal && configured ? operationFor(proposal, configured) : configured;
    const agent = proposal ? await services.store.getAgent(proposal.agentId) : null;
    const approvals = proposal && action === 'approve' ? await services.store.listApprovals(proposal.id) : [];
    return previewDecision({
      action,
      proposalId,
      proposal,
      operation,
      agent,
      approvals,
      decider,
      now: services.clock(),
      ...(services.people ? { people: services.people } : {}),
    });
  }

  return { checkClick, grantDurations };
}
