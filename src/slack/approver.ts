import { webApi, type AckFn, type App, type BlockAction, type ButtonAction, type ViewResponseAction, type ViewSubmitAction } from '@slack/bolt';
import { explainDecisionError, NOTHING_CHANGED, type DecisionAction, type DecisionPreview } from '../core/decision-preview.js';
import { TwokeyError } from '../core/errors.js';
import { SLACK_USER_ID, slackGroupIdentity, slackUserIdentity } from './platform.js';
import type { Decider, ProposalRecord } from '../core/model.js';
import { approversOf, configuredApproverIdentities } from '../core/model.js';
import { INBOX_UNAVAILABLE_WORDS, type ClickInbox } from '../outbox/inbox.js';
import { SLACK_CLICK_JOB } from './platform.js';
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
import { createSlackClickJob, type SlackClick } from './clicks.js';
import type { SlackLog } from './log.js';
import type { SlackServices } from './ports.js';
import { settleWithin } from '../lib/timeouts.js';
import { toDeliveryError } from './publisher.js';
import type { UsergroupDirectory } from './usergroups.js';

type WebClient = InstanceType<typeof webApi.WebClient>;

export interface SlackApproverDeps extends Pick<SlackServices, 'proposals' | 'store' | 'operation' | 'operations'> {
  /** "Approve for…": approve and grant (absent: the button is refused). */
  grants?: SlackServices['grants'];
  client: WebClient;
  usergroups: UsergroupDirectory;
  log: () => SlackLog;
  /** Where a click is stored before it is acknowledged; the outbox decides it from there. */
  inbox: Pick<ClickInbox, 'store' | 'wake'>;
  /** Opens a form after its button's ack (queued, so a burst of clicks cannot delay the acks). */
  afterAck<T>(task: () => Promise<T>): Promise<T>;
  /**
   * How long a form's submission waits for the core's preview, so that a refusal shows inside the
   * form; past it the submission is stored unchecked (the core checks it when it decides).
   */
  modalCheckBudgetMs?: number;
  clock: () => Date;
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
 * The human side of the handshake in Slack: Approve, Reject (through a modal), Approve for… (through
 * a modal) and Retry. A decision (a button or a submitted form) is stored before it is acknowledged
 * (Slack allows 3 s) and decided by the outbox after; the core enforces every rule again under the
 * proposal's row lock, so the checks here only shape what the person is told. Returns the outbox
 * handler that decides stored clicks.
 */
export function registerSlackApprover(bolt: App, deps: SlackApproverDeps) {
  const people = slackPeople(deps);
  const receive = clickReceiver(deps, people);
  registerDecisionButtons(bolt, deps, people, receive);
  registerGrantFlow(bolt, deps, people, receive);
  return {
    /** The outbox handler that decides stored clicks. */
    decideClick: createSlackClickJob({ ...deps, deciderFor: people.deciderFor, clickDecider: people.clickDecider, tell: people.tell, explain: explainRefusal }),
    /**
     * Takes an Approve or Retry press straight from the HTTP receiver, without Bolt's routing (which
     * in a burst of clicks would hold each answer behind the others): resolves once it may be
     * answered 200 (stored, or its failure to be told); null when the body is no such press.
     */
    takeDecisionButton(body: Record<string, unknown>): Promise<void> | null {
      const click = decisionButtonOf(body, deps.clock());
      return click ? receive.button(click, async () => {}) : null;
    },
  };
}

type SlackPeople = ReturnType<typeof slackPeople>;
type ClickReceiver = ReturnType<typeof clickReceiver>;

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
    const inRule = (configured?.approval.approverRule?.mentionedGroups ?? []).filter((a) => a.startsWith(GROUP_PREFIX));
    const groups = [...new Set([...approvers.filter((a) => a.startsWith(GROUP_PREFIX)), ...inRule])].map((a) => a.slice(GROUP_PREFIX.length));
    // A named approver needs no lookup unless the approver rule asks about groups; the owner rule is the core's.
    if ((approvers.includes(identity) && inRule.length === 0) || groups.length === 0) return { identity, via: 'slack' };
    try {
      const memberOf = await deps.usergroups.groupsOf(userId, groups);
      return { identity, memberOf: memberOf.map(slackGroupIdentity), via: 'slack' };
    } catch (error) {
      deps.log().warn({ error: toDeliveryError('usergroups.users.list', error).message }, 'Slack user group lookup failed');
      throw new TwokeyError('unavailable', 'twokey could not check your Slack user groups right now.');
    }
  }

  // The configuration is fixed for the life of the process: read once, at the first stored click.
  let groupsConfigured: boolean | undefined;

  /**
   * A stored click's decider. When no operation names a Slack user group (as approver, escalation
   * approver, policy-required approver or in an approver rule), `deciderFor` would look up no group
   * whatever the proposal says, so the proposal is not read for it: a round trip fewer per click.
   * `complete` is false then: only a proposal made under an earlier configuration can still name a
   * group, and a refusal tells the caller to look again (`deciderFor` with the proposal).
   */
  async function clickDecider(userId: string, read: () => Promise<ProposalRecord | null>): Promise<{ decider: Decider; complete: boolean }> {
    groupsConfigured ??= deps.operations().some((operation) => configuredApproverIdentities(operation).some((identity) => identity.startsWith(GROUP_PREFIX)));
    if (groupsConfigured) return { decider: await deciderFor(userId, await read()), complete: true };
    return { decider: await deciderFor(userId, null), complete: false };
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

  /** A form opener (Reject, Approve for…) that cannot open its form: why, privately. */
  async function refuse(error: unknown, verb: Verb, userId: string, channel: string | undefined, proposalId: string) {
    if (error instanceof TwokeyError) {
      deps.log().info({ proposalId, user: `slack:${userId}`, code: error.code, verb }, 'Slack click changed nothing');
      return tell(userId, channel, explainRefusal(error, verb, proposalId));
    }
    // Its only reads are the proposal's (Slack's own failures are told apart): the database is away.
    deps.log().warn({ proposalId, err: error }, `Slack ${verb} form not opened`);
    await tell(userId, channel, INBOX_UNAVAILABLE_WORDS);
  }

  return { deciderFor, clickDecider, tell, refuse };
}

type FormAck = AckFn<ViewResponseAction>;
type ButtonClick = Extract<SlackClick, { channel: string | null }>;

/**
 * A press of Approve or Retry as Slack sends it (one action, the proposal id as its value), read
 * from the raw interaction body; null for anything else.
 */
export function decisionButtonOf(body: Record<string, unknown>, receivedAt: Date): ButtonClick | null {
  const user = body.user as { id?: unknown } | null | undefined;
  const channel = body.channel as { id?: unknown } | null | undefined;
  const actions = body.actions;
  if (body.type !== 'block_actions' || typeof user?.id !== 'string' || !Array.isArray(actions) || actions.length !== 1) return null;
  const [only] = actions as Array<{ action_id?: unknown; value?: unknown } | null>;
  if (typeof only?.value !== 'string' || !only.value) return null;
  const action = only.action_id === APPROVE_ACTION ? 'approve' : only.action_id === RETRY_ACTION ? 'retry' : null;
  if (!action) return null;
  return {
    action,
    proposalId: only.value,
    userId: user.id,
    channel: typeof channel?.id === 'string' ? channel.id : null,
    receivedAt: receivedAt.toISOString(),
  };
}

/** Slack's answer that keeps a form open and shows `text` under one of its blocks. */
const formError = (block: string, text: string) => ({ response_action: 'errors' as const, errors: { [block]: text.replace(/[*`]/g, '') } });

function clickReceiver(deps: SlackApproverDeps, people: SlackPeople) {
  const { deciderFor, tell } = people;

  /** Stores the click; false (logged) when it could not be, and then nothing may be acknowledged as done. */
  async function stored(click: SlackClick): Promise<boolean> {
    try {
      await deps.inbox.store({ kind: SLACK_CLICK_JOB, payload: click, proposalId: click.proposalId });
      return true;
    } catch (error) {
      deps
        .log()
        .warn({ proposalId: click.proposalId, action: click.action, error: error instanceof Error ? error.message : 'unknown' }, 'Slack click not stored');
      return false;
    }
  }

  /** A decision button: stored, then acknowledged; if it cannot be stored the clicker is told so, privately. */
  async function button(click: ButtonClick, ack: () => Promise<void>): Promise<void> {
    const ok = await stored(click);
    await ack();
    if (ok) deps.inbox.wake(SLACK_CLICK_JOB);
    // After the answer, not before it: an ephemeral message in the channel, to this person only.
    else void tell(click.userId, click.channel ?? undefined, INBOX_UNAVAILABLE_WORDS);
  }

  /**
   * The core's preview for a submitted form, so a refusal can show inside it; null when it allows,
   * or did not answer within the budget (the core decides again either way).
   */
  async function previewRefusal(click: SlackClick, verb: DecisionAction, extraCheck?: (proposal: ProposalRecord) => void): Promise<string | null> {
    const check = (async () => {
      try {
        const proposal = await deps.store.getProposal(click.proposalId);
        const preview = await deps.proposals.preview(click.proposalId, verb, await deciderFor(click.userId, proposal));
        if (!preview.allowed) return `${preview.message} ${NOTHING_CHANGED}`;
        if (proposal) extraCheck?.(proposal);
        return null;
      } catch (error) {
        // The database may be away: storing the click will say so.
        return error instanceof TwokeyError ? explainRefusal(error, verb, click.proposalId) : null;
      }
    })();
    const early = await settleWithin(check, deps.modalCheckBudgetMs ?? 500);
    return early.settled ? early.value : null;
  }

  /** A submitted form: refused inside the form, or stored and closed; the decision comes after. */
  async function form(click: SlackClick, ack: FormAck, block: string, verb: DecisionAction, extraCheck?: (proposal: ProposalRecord) => void) {
    const refusal = await previewRefusal(click, verb, extraCheck);
    if (refusal) return ack(formError(block, refusal));
    if (!(await stored(click))) return ack(formError(block, INBOX_UNAVAILABLE_WORDS));
    await ack();
    deps.inbox.wake(SLACK_CLICK_JOB);
  }

  return { button, form, receivedAt: () => deps.clock().toISOString() };
}

/** Approve, Retry and Reject (through its modal). */
function registerDecisionButtons(bolt: App, deps: SlackApproverDeps, people: SlackPeople, receive: ClickReceiver): void {
  const { client } = deps;
  const { deciderFor, tell, refuse } = people;

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

  // Slack retries (X-Slack-Retry-Num) and double clicks are stored as well: the core counts one
  // approval per person and runs the operation once. Over HTTP the receiver takes these presses
  // itself (takeDecisionButton); these listeners serve Socket Mode.
  for (const actionId of [APPROVE_ACTION, RETRY_ACTION]) {
    bolt.action<BlockAction<ButtonAction>>(actionId, async ({ ack, body, action }) => {
      // Slack always sends the proposal id twokey put there; anything else names no proposal.
      if (typeof action.value !== 'string' || !action.value) return ack();
      const verb = actionId === APPROVE_ACTION ? 'approve' : 'retry';
      await receive.button(
        { action: verb, proposalId: action.value, userId: body.user.id, channel: body.channel?.id ?? null, receivedAt: receive.receivedAt() },
        () => ack(),
      );
    });
  }

  // Opening the form decides nothing, so it is not stored: its trigger_id is good for 3 seconds only.
  bolt.action<BlockAction<ButtonAction>>(REJECT_ACTION, async ({ ack, body, action }) => {
    await ack();
    if (action.value) await deps.afterAck(() => rejectClick(body.user.id, body.channel?.id, action.value ?? '', body.trigger_id));
  });

  bolt.view<ViewSubmitAction>(REJECT_MODAL, async ({ ack, body, view }) => {
    const reason = view.state.values[REASON_BLOCK]?.[REASON_INPUT]?.value ?? null;
    const click: SlackClick = { action: 'reject', proposalId: view.private_metadata, userId: body.user.id, reason, receivedAt: receive.receivedAt() };
    await receive.form(click, ack, REASON_BLOCK, 'reject');
  });
}

/** "Approve for…": the modal that approves and grants a standing approval. */
function registerGrantFlow(bolt: App, deps: SlackApproverDeps, people: SlackPeople, receive: ClickReceiver): void {
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
      durations = grantDurations(current);
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

  /** The durations this operation offers; throws the refusal when it offers none. */
  function grantDurations(proposal: ProposalRecord): number[] {
    const settings = deps.operation(proposal.operation)?.grants;
    if (!deps.grants || !settings?.allow) throw new TwokeyError('invalid_request', 'this operation does not allow approving for a while');
    return settings.durationsMs;
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
    const proposalId = view.private_metadata;
    if (!Number.isSafeInteger(durationMs) || durationMs <= 0 || (maxUses !== null && (!Number.isSafeInteger(maxUses) || maxUses <= 0))) {
      return ack(formError(GRANT_DURATION_BLOCK, `Choose a duration, and a whole number of uses (or none). ${NOTHING_CHANGED}`));
    }
    const click: SlackClick = { action: 'grant', proposalId, userId: body.user.id, grant: { durationMs, maxUses, bounded }, receivedAt: receive.receivedAt() };
    await receive.form(click, ack, GRANT_DURATION_BLOCK, 'approve', (proposal) => void grantDurations(proposal));
  });
}
