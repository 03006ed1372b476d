import { webApi, type App, type BlockAction, type ButtonAction, type ViewSubmitAction } from '@slack/bolt';
import { TwokeyError } from '../core/errors.js';
import type { Decider, ProposalRecord } from '../core/model.js';
import type { Store } from '../core/ports.js';
import { deciderRefusal, type ProposalService } from '../core/proposals.js';
import { APPROVE_ACTION, REASON_BLOCK, REASON_INPUT, REJECT_ACTION, REJECT_MODAL, RETRY_ACTION, rejectModal } from './blocks.js';
import type { SlackLog } from './log.js';
import { toDeliveryError } from './publisher.js';
import type { UsergroupDirectory } from './usergroups.js';

type WebClient = InstanceType<typeof webApi.WebClient>;

export interface SlackApproverDeps {
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'retry'>;
  store: Pick<Store, 'getProposal' | 'getAgent'>;
  operation(name: string): { name: string; approval: { approvers: string[] } } | undefined;
  clock: () => Date;
  client: WebClient;
  usergroups: UsergroupDirectory;
  log: () => SlackLog;
  /** Runs the work a click starts after its ack (queued, so a burst of clicks cannot delay the acks). */
  afterAck<T>(task: () => Promise<T>): Promise<T>;
  /** How long a modal submission may take before the modal is closed and the answer comes later. */
  modalBudgetMs?: number;
}

const GROUP_PREFIX = 'slack:group:';
/** A Slack user id, as the config file's `slack:U…` entries name them. */
const SLACK_USER_ID = /^[UW][A-Z0-9]{1,31}$/;

type Verb = 'approve' | 'reject' | 'retry';

/** What a person who clicked is told when the click changed nothing (always privately). */
export function explainRefusal(error: unknown, verb: Verb, proposalId: string): string {
  if (!(error instanceof TwokeyError)) {
    return `twokey could not complete your ${verb} of \`${proposalId}\` because of an internal error. The message shows the proposal's current state; try again if it did not change.`;
  }
  switch (error.code) {
    case 'not_an_approver':
      return `You are not an approver of this operation, so your ${verb} changed nothing. Approvers are listed in twokey's configuration.`;
    case 'owner_cannot_approve':
      return `You own the agent that proposed this, so you cannot ${verb} it: two keys means two different people. Nothing was changed.`;
    case 'not_pending':
      return `Nothing was changed: ${error.message}.`;
    case 'expired':
      return 'This proposal has expired, so nothing was changed. The agent has to propose it again.';
    case 'not_found':
      return `twokey has no proposal \`${proposalId}\`.`;
    case 'operation_removed':
      return 'The operation of this proposal is no longer in twokey\'s configuration, so it cannot be decided any more.';
    case 'execution_failed':
      return `${verb === 'retry' ? 'The operation failed again' : 'Approved, but the operation failed'}: ${error.message.replace(/^execution failed: /, '')}. The approval stands; press Retry on the message to run it again.`;
    case 'unavailable':
      return `${error.message} Nothing was changed; try again in a moment.`;
    default:
      return `Nothing was changed: ${error.message}.`;
  }
}

function within<T>(work: Promise<T>, ms: number): Promise<T | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * The human side of the handshake in Slack: Approve, Reject (through a modal) and Retry. Every
 * listener acknowledges first (Slack allows 3 s) and decides after; the core enforces every rule
 * again under the proposal's row lock, so the checks here only shape what the person is told.
 */
export function registerSlackApprover(bolt: App, deps: SlackApproverDeps): void {
  const { client } = deps;

  /** The person behind a click, with the user groups of this operation's approvers they belong to. */
  async function deciderFor(userId: string, proposal: ProposalRecord | null): Promise<Decider> {
    // Checked before the id becomes an identity: `group:S0OPS` would otherwise read as `slack:group:S0OPS`.
    if (typeof userId !== 'string' || !SLACK_USER_ID.test(userId)) throw new TwokeyError('not_an_approver', 'not a Slack user id');
    const identity = `slack:${userId}`;
    const approvers = proposal ? (deps.operation(proposal.operation)?.approval.approvers ?? []) : [];
    const groups = approvers.filter((a) => a.startsWith(GROUP_PREFIX)).map((a) => a.slice(GROUP_PREFIX.length));
    // A named approver needs no lookup; the owner rule is the core's and does not depend on groups.
    if (approvers.includes(identity) || groups.length === 0) return { identity, via: 'slack' };
    try {
      const memberOf = await deps.usergroups.groupsOf(userId, groups);
      return { identity, memberOf: memberOf.map((id) => `${GROUP_PREFIX}${id}`), via: 'slack' };
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

  async function approveClick(userId: string, channel: string | undefined, proposalId: string): Promise<void> {
    try {
      const decider = await deciderFor(userId, await deps.store.getProposal(proposalId));
      const { outcome, proposal } = await deps.proposals.approve(proposalId, decider);
      deps.log().info({ proposalId, approver: decider.identity, outcome, status: proposal.status }, 'Slack approval');
      // The message shows every other outcome; a failed execution deserves a word to the one who caused it.
      if (outcome === 'quorum_reached' && proposal.status === 'approved' && proposal.error) {
        await tell(userId, channel, explainRefusal(new TwokeyError('execution_failed', proposal.error), 'approve', proposalId));
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

  async function refuse(error: unknown, verb: Verb, userId: string, channel: string | undefined, proposalId: string) {
    if (error instanceof TwokeyError) {
      deps.log().info({ proposalId, user: `slack:${userId}`, code: error.code, verb }, 'Slack click changed nothing');
    } else {
      deps.log().error({ proposalId, err: error }, `Slack ${verb} failed`);
    }
    await tell(userId, channel, explainRefusal(error, verb, proposalId));
  }

  /**
   * The same rules as the core's, read without a lock, so that someone who may not decide is told
   * at once instead of filling in a modal for nothing. The core checks again on submission.
   */
  async function mayReject(proposalId: string, proposal: ProposalRecord | null, decider: Decider): Promise<ProposalRecord> {
    if (!proposal) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    const operation = deps.operation(proposal.operation);
    if (!operation) throw new TwokeyError('operation_removed', `operation "${proposal.operation}" is no longer configured`);
    const agent = await deps.store.getAgent(proposal.agentId);
    const refusal = deciderRefusal(operation, agent ?? { name: proposal.agentId, owners: [] }, decider);
    if (refusal) throw refusal;
    if (proposal.status !== 'pending') throw new TwokeyError('not_pending', `proposal ${proposal.id} is ${proposal.status}`);
    if (deps.clock().getTime() >= proposal.expiresAt.getTime()) throw new TwokeyError('expired', 'expired');
    return proposal;
  }

  async function rejectClick(userId: string, channel: string | undefined, proposalId: string, triggerId: string): Promise<void> {
    let proposal: ProposalRecord;
    try {
      const current = await deps.store.getProposal(proposalId);
      proposal = await mayReject(proposalId, current, await deciderFor(userId, current));
    } catch (error) {
      await refuse(error, 'reject', userId, channel, proposalId);
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
    const outcome = deps.afterAck(() => rejectSubmission(body.user.id, proposalId, reason));
    // A rejection is one short transaction: waiting for it lets a refusal show inside the modal.
    // If it is slow, close the modal within Slack's 3 s and say the outcome afterwards.
    const early = await within(outcome, deps.modalBudgetMs ?? 2000);
    if (early === 'late') {
      await ack();
      const refusal = await outcome;
      if (refusal) await tell(body.user.id, undefined, refusal);
      return;
    }
    if (early === null) {
      await ack();
    } else {
      await ack({ response_action: 'errors', errors: { [REASON_BLOCK]: early.replace(/[*`]/g, '') } });
    }
  });
}
