import type { FastifyBaseLogger } from 'fastify';
import { CARD_WORDS } from '../chat/card-words.js';
import type { DecisionResult } from '../core/decisions.js';
import { explainDecisionError, NOTHING_CHANGED, type DecisionAction } from '../core/decision-preview.js';
import { isTwokeyError, TwokeyError } from '../core/errors.js';
import { completedBy, type JobClaim, type JobCompletion, type JobHandler, type JobPayloads } from '../core/jobs.js';
import type { Decider, ProposalRecord } from '../core/model.js';
import type { TeamsAction } from './adaptive-card.js';
import type { TeamsServices } from './ports.js';

/** A Teams click as stored before its invoke is answered; its schema is `teams.click` in src/core/jobs.ts. */
export type TeamsClick = JobPayloads['teams.click'];

/** "Approve for…" is an approval first: every rule of Approve applies to it. */
export const decisionOf = (action: TeamsAction): DecisionAction => (action === 'grant' ? 'approve' : action);

/** What the clicker is told once their click is decided (Teams shows it under the card, to them only). */
export const DECIDED_WORDS: Record<TeamsAction, string> = {
  approve: 'You approved. The card shows where the proposal stands.',
  grant: 'You approved, and approved the same again for a while. The card shows where the proposal stands.',
  reject: 'You rejected it. The card shows it.',
  retry: 'You ran it again. The card shows how it went.',
};

/** Refusals a click's own earlier run may have caused (its first run decided; this is the outbox's retry). */
const CAUSED_BY_AN_EARLIER_RUN = new Set(['not_pending', 'nothing_to_retry']);

/** The core's decision preview for a click, read without locks: a refusal becomes the invoke's answer. */
export function createClickChecks(services: TeamsServices) {
  /** The first duration "Approve for…" offers on this operation; throws the refusal when it offers none. */
  function grantDuration(operationName: string): number {
    const settings = services.operation(operationName)?.grants;
    const first = settings?.allow ? settings.durationsMs[0] : undefined;
    if (!services.grants || first === undefined) throw new TwokeyError('invalid_request', 'This operation does not allow approving for a while');
    return first;
  }

  async function checkClick(action: TeamsAction, proposalId: string, decider: Decider): Promise<{ refusal: string | null; proposal: ProposalRecord | null }> {
    const proposal = await services.store.getProposal(proposalId);
    // The core's own preview (escalated approvers, owner ban, quorum, step-up), read without locks.
    const preview = await services.proposals.preview(proposalId, decisionOf(action), decider);
    if (!preview.allowed) return { refusal: `${preview.message} ${NOTHING_CHANGED}`, proposal };
    if (action === 'grant' && proposal) {
      try {
        grantDuration(proposal.operation);
      } catch (error) {
        return { refusal: explainDecisionError(error, 'approve'), proposal };
      }
    }
    return { refusal: null, proposal };
  }

  return { checkClick, grantDuration };
}

export interface TeamsClickJobOptions {
  services: TeamsServices;
  logger: () => FastifyBaseLogger;
  /** The click's outcome, for an invoke still waiting for it in this process. */
  onOutcome(jobId: number, words: string): void;
}

/**
 * Decides stored Teams clicks: the outbox runs this for every `teams.click` job, in the process that
 * stored it or, should that one die, in the next. Running one again is harmless (one approval per
 * person; a decided proposal refuses another decision).
 */
export function createTeamsClickJob(options: TeamsClickJobOptions): JobHandler<'teams.click'> {
  const { services } = options;

  /** What the clicker is told: a counted approval that leaves the quorum short says how many more it waits for. */
  async function approvedWords(action: 'approve' | 'grant', result: DecisionResult): Promise<string> {
    if (result.outcome !== 'counted' || result.proposal.status !== 'pending') return DECIDED_WORDS[action];
    const count = (await services.store.listApprovals(result.proposal.id)).length;
    const missing = Math.max(0, result.proposal.quorum - count);
    return `You approved; ${CARD_WORDS.status.waiting(missing, CARD_WORDS.approvalsCount(count, result.proposal.quorum))}.`;
  }

  /** What the clicker is told; an approval or a rejection also completes the click's job in its own transaction, and answers how that went. */
  async function decide(click: TeamsClick, job: JobClaim | undefined): Promise<{ words: string; completed?: JobCompletion | undefined }> {
    const { proposalId, decider } = click;
    switch (click.action) {
      case 'approve': {
        const result = await services.proposals.approve(proposalId, decider, { completing: job });
        return { words: await approvedWords('approve', result), completed: result.jobCompletion };
      }
      case 'retry':
        await services.proposals.retry(proposalId, decider);
        return { words: DECIDED_WORDS.retry };
      case 'reject': {
        const result = await services.proposals.reject(proposalId, decider, click.reason, { completing: job });
        return { words: DECIDED_WORDS.reject, completed: result.jobCompletion };
      }
      case 'grant': {
        if (!services.grants) throw new TwokeyError('invalid_request', 'This operation does not allow approving for a while');
        const result = await services.grants.approveAndGrant(proposalId, decider, click.grant);
        options.logger().info({ proposalId, approver: decider.identity, grantId: result.grant.id }, 'Teams approval with a grant');
        return { words: await approvedWords('grant', result) };
      }
    }
  }

  return async (click, { attempt, jobId, claim }) => {
    try {
      const { words, completed } = await decide(click, claim);
      options.onOutcome(jobId, words);
      return completedBy(completed);
    } catch (error) {
      // Not a refusal (the database went away, a bug): the outbox runs the click again, with backoff.
      if (!isTwokeyError(error)) throw error;
      const verb = decisionOf(click.action);
      options.logger().info({ proposalId: click.proposalId, code: error.code, verb, attempt }, 'Teams click changed nothing');
      if (attempt > 1 && CAUSED_BY_AN_EARLIER_RUN.has(error.code)) return;
      options.onOutcome(jobId, explainDecisionError(error, verb));
    }
  };
}
