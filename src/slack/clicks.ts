import { failedExecutionWords, type DecisionAction } from '../core/decision-preview.js';
import { TwokeyError } from '../core/errors.js';
import { isFailedExecution } from '../core/outcome.js';
import { completedBy, type JobClaim, type JobCompletion, type JobHandler, type JobPayloads } from '../core/jobs.js';
import type { SlackLog } from './log.js';
import type { SlackServices } from './ports.js';
import type { Decider, ProposalRecord } from '../core/model.js';

/**
 * A Slack click as it is stored before it is answered (src/outbox/inbox.ts): its schema is the
 * `slack.click` entry of the job catalogue (src/core/jobs.ts). Slack's `response_url` and `trigger_id`
 * are not kept: the outcome is told through the bot's own API (chat.postEphemeral, a direct
 * message), which works at any later time, and the message is edited by the outbox's chat.update
 * like every other change.
 */
export type SlackClick = JobPayloads['slack.click'];

export interface SlackClickDeps extends Pick<SlackServices, 'proposals' | 'store'> {
  grants?: SlackServices['grants'];
  log: () => SlackLog;
  deciderFor(userId: string, proposal: ProposalRecord | null): Promise<Decider>;
  /** A stored click's decider, reading the proposal (`read`) only when a configured group could count; `complete` false when it did not. */
  clickDecider(userId: string, read: () => Promise<ProposalRecord | null>): Promise<{ decider: Decider; complete: boolean }>;
  /** Says it privately: ephemeral in the channel, or a direct message without one. */
  tell(userId: string, channel: string | undefined, text: string): Promise<void>;
  /** The core's words for a refusal, with the proposal id set apart. */
  explain(error: unknown, verb: DecisionAction, proposalId: string): string;
}

/** What the click is, as one of the core's decisions (an "Approve for…" form is an approval first). */
const verbOf = (click: SlackClick): DecisionAction => (click.action === 'grant' ? 'approve' : click.action);

/**
 * Refusals that a click's own earlier run may have caused: a run whose process died after it
 * decided, and that runs again, finds the proposal decided or retried already. Told on a first run
 * only, so a restart does not tell someone their own click was refused.
 */
const CAUSED_BY_AN_EARLIER_RUN = new Set(['not_pending', 'nothing_to_retry']);

/**
 * Decides stored Slack clicks: the outbox runs this for every `slack.click` job, in the process that
 * stored it or, if that one died, in the next. Running a click again is harmless: the core counts one
 * approval per person, a decided proposal refuses another decision, and a grant with the same terms
 * for the same proposal is found rather than made twice.
 */
export function createSlackClickJob(deps: SlackClickDeps): JobHandler<'slack.click'> {
  /** Decides the click; an approval or a rejection completes the click's job in its own transaction, and answers how that went. */
  async function decide(click: SlackClick, job: JobClaim | undefined): Promise<JobCompletion | undefined> {
    const read = () => deps.store.getProposal(click.proposalId);
    const { decider, complete } = await deps.clickDecider(click.userId, read);
    try {
      return await decideAs(click, decider, job);
    } catch (error) {
      if (complete || !(error instanceof TwokeyError) || error.code !== 'not_an_approver') throw error;
      // Refused without the proposal read: it may name a group the configuration no longer does (made
      // before a restart with another configuration). Decided again as `deciderFor` sees it, if that
      // finds the person in a group; nothing was written by the refusal.
      const withGroups = await deps.deciderFor(click.userId, await read());
      if (!withGroups.memberOf?.length) throw error;
      return decideAs(click, withGroups, job);
    }
  }

  async function decideAs(click: SlackClick, decider: Decider, job: JobClaim | undefined): Promise<JobCompletion | undefined> {
    switch (click.action) {
      case 'approve': {
        const { outcome, proposal, jobCompletion } = await deps.proposals.approve(click.proposalId, decider, { completing: job });
        deps.log().info({ proposalId: click.proposalId, approver: decider.identity, outcome, status: proposal.status }, 'Slack approval');
        // The message shows every other outcome; a failed execution deserves a word to the one who caused it.
        if (outcome === 'quorum_reached' && isFailedExecution(proposal)) {
          await deps.tell(click.userId, click.channel ?? undefined, failedExecutionWords('approve', proposal.error ?? ''));
        }
        return jobCompletion;
      }
      case 'retry': {
        const proposal = await deps.proposals.retry(click.proposalId, decider);
        deps.log().info({ proposalId: click.proposalId, approver: decider.identity, status: proposal.status }, 'Slack retry');
        return undefined;
      }
      case 'reject': {
        const { jobCompletion } = await deps.proposals.reject(click.proposalId, decider, click.reason, { completing: job });
        deps.log().info({ proposalId: click.proposalId, approver: decider.identity, withReason: Boolean(click.reason) }, 'Slack rejection');
        return jobCompletion;
      }
      case 'grant': {
        if (!deps.grants) throw new TwokeyError('invalid_request', 'grants are not available');
        const { grant } = await deps.grants.approveAndGrant(click.proposalId, decider, click.grant);
        deps.log().info({ proposalId: click.proposalId, approver: decider.identity, grantId: grant.id }, 'Slack approval with a grant');
        return undefined;
      }
    }
  }

  return async (click, { attempt, claim }) => {
    try {
      return completedBy(await decide(click, claim));
    } catch (error) {
      // Not a refusal (the database went away, a bug): the outbox runs the click again, with backoff.
      if (!(error instanceof TwokeyError)) throw error;
      const verb = verbOf(click);
      deps.log().info({ proposalId: click.proposalId, user: `slack:${click.userId}`, code: error.code, verb, attempt }, 'Slack click changed nothing');
      if (attempt > 1 && CAUSED_BY_AN_EARLIER_RUN.has(error.code)) return;
      const channel = click.action === 'approve' || click.action === 'retry' ? (click.channel ?? undefined) : undefined;
      await deps.tell(click.userId, channel, deps.explain(error, verb, click.proposalId));
    }
  };
}
