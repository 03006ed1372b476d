import { webApi, type AckFn, type App, type BlockAction, type ButtonAction, type ViewResponseAction, type ViewSubmitAction } from '@slack/bolt';
import { explainDecisionError, failedExecutionWords, NOTHING_CHANGED, type DecisionAction, type DecisionPreview } from '../core/decision-preview.js';
import { TwokeyError } from '../core/errors.js';
import { SLACK_USER_ID, slackGroupIdentity, slackUserIdentity } from '../core/identity.js';
import type { Decider, ProposalRecord } from '../core/model.js';
import { isFailedExecution } from '../core/outcome.js';
import { approversOf } from '../core/model.js';
import {
  APPROVE_ACTION,
  GRANT_ACTION,
  GRANT_BOUNDED_BLOCK,
  GRANT_DURATION_BLOCK,
  GRANT_INPUT,
  GRANT_MODAL,
  GRANT_USES_BLOCK,
  REASON_BLOCK,
  REASON_INPUT,
  REJECT_ACTION,
  REJECT_MODAL,
  RETRY_ACTION,
  grantModal,
  rejectModal,
} from './blocks.js';
import type { SlackLog } from './log.js';
import type { SlackServices } from './ports.js';
import { settleWithin } from '../lib/timeouts.js';
import { toDeliveryError } from './publisher.js';
import type { UsergroupDirectory } from './usergroups.js';

type WebClient = InstanceType<typeof webApi.WebClient>;

export interface SlackApproverDeps extends Pick<SlackServices, 'proposals' | 'store' | 'operation'> {
  /** "Approve for…": approve and grant (absent: the button is refused). */
  grants?: SlackServices['grants'];
  client: WebClient;
  usergroups: UsergroupDirectory;
  log: () => SlackLog;
  /** Runs the work a click starts after its ack (queued, so a burst of clicks cannot delay the acks). */
  afterAck<T>(task: () => Promise<T>): Promise<T>;
  /** How long a modal submission may take before the modal is closed and the answer comes later. */
  modalBudgetMs?: number;
}

const GROUP_PREFIX = 'slack:group:';

type Verb = DecisionAction;

/**
 * What a person who clicked is told when the click changed nothing (always privately): the core's
 * words, with the proposal id in a code span.
 */
export function explainRefusal(error: unknown, verb: Verb, proposalId: string): string {
  const words = explainDecisionError(error, verb);
  return proposalId ? words.replace(proposalId, `\`${proposalId}\``) : words;
}

/**
 * The human side of the handshake in Slack: Approve, Reject (through a modal) and Retry. Every
 * listener acknowledges first (Slack allows 3 s) and decides after; the core enforces every rule
 * again under the proposal's row lock, so the checks here only shape what the person is told.
 */
export function registerSlackApprover(bolt: App, deps: SlackApproverDeps): void {
  const people = slackPeople(deps);
  const closeModal = modalCloser(deps, people.tell);
  registerDecisionButtons(bolt, deps, people, closeModal);
  registerGrantFlow(bolt, deps, people, closeModal);
}

type SlackPeople = ReturnType<typeof slackPeople>;
type CloseModal = ReturnType<typeof modalCloser>;

/** Who clicked, and how twokey speaks to them privately. */
function slackPeople(deps: SlackApproverDeps) {
  const { client } = deps;

  /** The person behind a click, with the user groups of this operation's approvers they belong to. */
  async function deciderFor(userId: string, proposal: ProposalRecord | null): Promise<Decider> {
    // Checked before the id becomes an identity: `group:S0OPS` would otherwise read as `slack:group:S0OPS`.
    if (typeof userId !== 'string' || !SLACK_USER_ID.test(userId)) throw new TwokeyError('not_an_approver', 'not a Slack user id');
    const identity = slackUserIdentity(userId);
    const configured = proposal ? deps.operation(proposal.operation) : undefined;
    const approvers = proposal && configured ? approversOf(proposal, configured) : [];
    const groups = approvers.filter((a) => a.startsWith(GROUP_PREFIX)).map((a) => a.slice(GROUP_PREFIX.length));
    // A named approver needs no lookup; the owner rule is the core's and does not depend on groups.
    if (approvers.includes(identity) || groups.length === 0) return { identity, via: 'slack' };
    try {
      const memberOf = await deps.usergroups.groupsOf(userId, groups);
      return { identity, memberOf: memberOf.map(slackGroupIdentity), via: 'slack' };
    } catch (error) {
      deps.log().warn({ error: toDeliveryError('usergroups.users.list', error).message }, 'Slack user group lookup failed');
      throw new TwokeyError('unavailable', 'twokey could not check your Slack user groups right now.');
    }
  }

  /** Says it privately: an ephemeral message in the channel, or a direct message when there is none. */
  async function tell(userId: string, channel: string | undefined, text: string): Promise<void> {
    try {
      if (channel) await client.chat.postEphemeral({ channel, user: userId, text });
      else await client.chat.postMessage({ channel: userId, text });
    } catch (error) {
      deps.log().warn({ error: toDeliveryError('chat.postEphemeral', error).message }, 'could not tell a Slack user the outcome of their click');
    }
  }

  async function refuse(error: unknown, verb: Verb, userId: string, channel: string | undefined, proposalId: string) {
    if (error instanceof TwokeyError) {
      deps.log().info({ proposalId, user: `slack:${userId}`, code: error.code, verb }, 'Slack click changed nothing');
    } else {
      deps.log().error({ proposalId, err: error }, `Slack ${verb} failed`);
    }
    await tell(userId, channel, explainRefusal(error, verb, proposalId));
  }

  return { deciderFor, tell, refuse };
}

function modalCloser(deps: SlackApproverDeps, tell: SlackPeople['tell']) {
  /**
   * Answers a modal's submission with its outcome (null, or the refusal to show under `block`). A
   * grant or a rejection is one short transaction: waiting for it lets a refusal show inside the
   * modal. If it is slow, the modal closes within Slack's 3 s and the outcome is said afterwards.
   */
  async function closeModal(ack: AckFn<ViewResponseAction>, userId: string, outcome: Promise<string | null>, block: string): Promise<void> {
    const early = await settleWithin(outcome, deps.modalBudgetMs ?? 2000);
    if (!early.settled) {
      await ack();
      const refusal = await outcome;
      if (refusal) await tell(userId, undefined, refusal);
      return;
    }
    if (early.value === null) await ack();
    else await ack({ response_action: 'errors', errors: { [block]: early.value.replace(/[*`]/g, '') } });
  }
  return closeModal;
}

/** Approve, Retry and Reject (through its modal). */
function registerDecisionButtons(bolt: App, deps: SlackApproverDeps, people: SlackPeople, closeModal: CloseModal): void {
  const { client } = deps;
  const { deciderFor, tell, refuse } = people;

  async function approveClick(userId: string, channel: string | undefined, proposalId: string): Promise<void> {
    try {
      const decider = await deciderFor(userId, await deps.store.getProposal(proposalId));
      const { outcome, proposal } = await deps.proposals.approve(proposalId, decider);
      deps.log().info({ proposalId, approver: decider.identity, outcome, status: proposal.status }, 'Slack approval');
      // The message shows every other outcome; a failed execution deserves a word to the one who caused it.
      if (outcome === 'quorum_reached' && isFailedExecution(proposal)) {
        await tell(userId, channel, failedExecutionWords('approve', proposal.error ?? ''));
      }
    } catch (error) {
      await refuse(error, 'approve', userId, channel, proposalId);
    }
  }

  async function retryClick(userId: string, channel: string | undefined, proposalId: string): Promise<void> {
    try {
      const decider = await deciderFor(userId, await deps.store.getProposal(proposalId));
      const proposal = await deps.proposals.retry(proposalId, decider);
      deps.log().info({ proposalId, approver: decider.identity, status: proposal.status }, 'Slack retry');
    } catch (error) {
      await refuse(error, 'retry', userId, channel, proposalId);
    }
  }

  async function rejectClick(userId: string, channel: string | undefined, proposalId: string, triggerId: string): Promise<void> {
    // The core's preview, read without a lock, so that someone who may not decide is told at once
    // instead of filling in a modal for nothing. The core decides again on submission.
    let proposal: ProposalRecord | null;
    let preview: DecisionPreview;
    try {
      proposal = await deps.store.getProposal(proposalId);
      preview = await deps.proposals.preview(proposalId, 'reject', await deciderFor(userId, proposal));
    } catch (error) {
      await refuse(error, 'reject', userId, channel, proposalId);
      return;
    }
    if (!preview.allowed || !proposal) {
      deps
        .log()
        .info({ proposalId, user: `slack:${userId}`, code: preview.allowed ? 'not_found' : preview.code, verb: 'reject' }, 'Slack click changed nothing');
      await tell(userId, channel, `${preview.allowed ? '' : preview.message} ${NOTHING_CHANGED}`.trim());
      return;
    }
    try {
      await client.views.open({ trigger_id: triggerId, view: rejectModal(proposal) });
    } catch (error) {
      // A retried delivery of a click whose modal is already open: the person sees the modal.
      if (error instanceof webApi.WebAPIPlatformError && error.data.error === 'trigger_exchanged') return;
      const reason = toDeliveryError('views.open', error).message;
      deps.log().warn({ proposalId, error: reason }, 'could not open the Slack reject modal');
      await tell(userId, channel, `Slack did not let twokey open the reject dialog (${reason}). Nothing was changed; click Reject again.`);
    }
  }

  /** Resolves to null when rejected, or to what the person must be told. */
  async function rejectSubmission(userId: string, proposalId: string, reason: string | null): Promise<string | null> {
    try {
      const decider = await deciderFor(userId, await deps.store.getProposal(proposalId));
      await deps.proposals.reject(proposalId, decider, reason);
      deps.log().info({ proposalId, approver: decider.identity, withReason: Boolean(reason) }, 'Slack rejection');
      return null;
    } catch (error) {
      if (error instanceof TwokeyError) {
        deps.log().info({ proposalId, user: `slack:${userId}`, code: error.code, verb: 'reject' }, 'Slack click changed nothing');
      } else {
        deps.log().error({ proposalId, err: error }, 'Slack reject failed');
      }
      return explainRefusal(error, 'reject', proposalId);
    }
  }

  bolt.action<BlockAction<ButtonAction>>(APPROVE_ACTION, async ({ ack, body, action }) => {
    await ack();
    // Slack retries (X-Slack-Retry-Num) and double clicks go through as well: the core counts one
    // approval per person and runs the operation once.
    if (action.value) await deps.afterAck(() => approveClick(body.user.id, body.channel?.id, action.value ?? ''));
  });

  bolt.action<BlockAction<ButtonAction>>(RETRY_ACTION, async ({ ack, body, action }) => {
    await ack();
    if (action.value) await deps.afterAck(() => retryClick(body.user.id, body.channel?.id, action.value ?? ''));
  });

  bolt.action<BlockAction<ButtonAction>>(REJECT_ACTION, async ({ ack, body, action }) => {
    await ack();
    if (action.value) await deps.afterAck(() => rejectClick(body.user.id, body.channel?.id, action.value ?? '', body.trigger_id));
  });

  bolt.view<ViewSubmitAction>(REJECT_MODAL, async ({ ack, body, view }) => {
    const proposalId = view.private_metadata;
    const reason = view.state.values[REASON_BLOCK]?.[REASON_INPUT]?.value ?? null;
    await closeModal(
      ack,
      body.user.id,
      deps.afterAck(() => rejectSubmission(body.user.id, proposalId, reason)),
      REASON_BLOCK,
    );
  });
}

/** "Approve for…": the modal that approves and grants a standing approval. */
function registerGrantFlow(bolt: App, deps: SlackApproverDeps, people: SlackPeople, closeModal: CloseModal): void {
  const { client } = deps;
  const { deciderFor, tell, refuse } = people;

  async function grantClick(userId: string, channel: string | undefined, proposalId: string, triggerId: string): Promise<void> {
    let proposal: ProposalRecord;
    let durations: number[];
    try {
      const current = await deps.store.getProposal(proposalId);
      // The core's preview of an approval, read without a lock; the core checks again under the lock.
      const preview = await deps.proposals.preview(proposalId, 'approve', await deciderFor(userId, current));
      if (!preview.allowed || !current) {
        await tell(userId, channel, `${preview.allowed ? '' : preview.message} ${NOTHING_CHANGED}`.trim());
        return;
      }
      proposal = current;
      const settings = deps.operation(proposal.operation)?.grants;
      if (!deps.grants || !settings?.allow) throw new TwokeyError('invalid_request', 'this operation does not allow approving for a while');
      durations = settings.durationsMs;
    } catch (error) {
      await refuse(error, 'approve', userId, channel, proposalId);
      return;
    }
    try {
      await client.views.open({ trigger_id: triggerId, view: grantModal(proposal, durations) });
    } catch (error) {
      if (error instanceof webApi.WebAPIPlatformError && error.data.error === 'trigger_exchanged') return;
      const reason = toDeliveryError('views.open', error).message;
      deps.log().warn({ proposalId, error: reason }, 'could not open the Slack grant modal');
      await tell(userId, channel, `Slack did not let twokey open the dialog (${reason}). Nothing was changed; click again.`);
    }
  }

  async function grantSubmission(
    userId: string,
    proposalId: string,
    request: { durationMs: number; maxUses: number | null; bounded: boolean },
  ): Promise<string | null> {
    try {
      if (!deps.grants) throw new TwokeyError('invalid_request', 'grants are not available');
      const decider = await deciderFor(userId, await deps.store.getProposal(proposalId));
      const { grant } = await deps.grants.approveAndGrant(proposalId, decider, request);
      deps.log().info({ proposalId, approver: decider.identity, grantId: grant.id }, 'Slack approval with a grant');
      return null;
    } catch (error) {
      if (!(error instanceof TwokeyError)) deps.log().error({ proposalId, err: error }, 'Slack grant failed');
      return explainRefusal(error, 'approve', proposalId);
    }
  }

  bolt.action<BlockAction<ButtonAction>>(GRANT_ACTION, async ({ ack, body, action }) => {
    await ack();
    if (action.value) await deps.afterAck(() => grantClick(body.user.id, body.channel?.id, action.value ?? '', body.trigger_id));
  });

  bolt.view<ViewSubmitAction>(GRANT_MODAL, async ({ ack, body, view }) => {
    const values = view.state.values;
    const durationMs = Number(values[GRANT_DURATION_BLOCK]?.[GRANT_INPUT]?.selected_option?.value ?? Number.NaN);
    const usesText = values[GRANT_USES_BLOCK]?.[GRANT_INPUT]?.value;
    const maxUses = usesText ? Number(usesText) : null;
    const bounded = (values[GRANT_BOUNDED_BLOCK]?.[GRANT_INPUT]?.selected_options ?? []).some((option) => option.value === 'bounded');
    const outcome = deps.afterAck(() => grantSubmission(body.user.id, view.private_metadata, { durationMs, maxUses, bounded }));
    await closeModal(ack, body.user.id, outcome, GRANT_DURATION_BLOCK);
  });
}
