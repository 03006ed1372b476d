import { isAutomaticDecider } from '../core/model.js';
import { isFailedExecution } from '../core/outcome.js';
import { CARD_WORDS, type CardTone, type CardWords } from './card-words.js';
import type { ChatFollowUp, ProposalMessageView } from './types.js';

export { CARD_WORDS, type CardTone, type CardWords } from './card-words.js';

/**
 * One piece of a line. Data, never markup: each converter (Block Kit, a Discord embed, the console's
 * HTML, …) renders and escapes every piece the way its platform needs.
 */
export type CardInline =
  /** twokey's own words. */
  | { type: 'text'; text: string }
  /** twokey's own words, stressed (a state's name). */
  | { type: 'strong'; text: string }
  /** Text an agent or a person chose (an agent's name, a reason, a cost): it must not format, link or mention. */
  | { type: 'value'; text: string }
  /** Machine text shown exactly as it is (an executor's result or error). */
  | { type: 'verbatim'; text: string }
  /** An id or a rule's name: fixed-width where the platform has it. */
  | { type: 'code'; text: string }
  /** Who: `slack:U…`, `discord:user:…`, `web:…`, `policy:…`; a mention where the platform can make one. */
  | { type: 'identity'; identity: string }
  /** A time: `relative` while it is still to come ("in 5 minutes"), `absolute` after. */
  | { type: 'time'; at: Date; style: 'relative' | 'absolute' }
  | { type: 'link'; text: string; url: string };

export type CardText = CardInline[];

/** One line of the status: a tone gives it the platform's symbol; a continuation line has none. */
export interface CardLine {
  tone: CardTone | null;
  text: CardText;
}

export type CardFieldId = 'agent' | 'confirmationType' | 'cost' | 'expiry' | 'approvals' | 'proposal';

export interface CardField {
  id: CardFieldId;
  label: string;
  value: CardText;
}

/** The ids the platforms turn into their own (`twokey_approve`, `twokey:approve:<id>`, a form's URL). */
export type CardActionId = 'approve' | 'grant' | 'reject' | 'retry' | 'open';

export interface CardAction {
  id: CardActionId;
  label: string;
  style: 'primary' | 'danger' | 'default';
  /** A second look before it acts, for a channel that can ask (Slack's confirm dialog). */
  confirm?: { title: string; text: string; confirm: string; deny: string };
  /** Only `open`: where the proposal is in the web console. */
  url?: string;
}

/**
 * A proposal as every channel shows it. `full` is a request people act on; `compact` is a decision
 * no human made (a policy rule or a grant): one line, never buttons, then the outcome as it changes.
 */
export interface ApprovalCard {
  proposalId: string;
  layout: 'full' | 'compact';
  /** The operation's name. */
  title: string;
  /** What the operation does, from the config. */
  subtitle: string;
  tone: CardTone;
  /** The tone's name ("Pending", "Execution failed"). */
  state: string;
  /** The operation's summary template rendered for these params; agent-chosen values inside. */
  summary: string;
  /**
   * What the summary warns of (look-alike words, mixed scripts), as display-safe rendering appended
   * it inline. Listed apart so a converter that must shorten the summary keeps them (`fitSummary`).
   */
  warnings: string[];
  /** Labels of the parts a layout may show as fields: the status line, and the subtitle. */
  labels: { status: string; subtitle: string };
  status: CardLine[];
  fields: CardField[];
  actions: CardAction[];
  /** One plain line for notifications, previews and screen readers. */
  notification: string;
}

/** Reasons are typed by people in a form; a card shows them on one line. */
const oneLine = (text: string): string => text.replace(/\s+/g, ' ').trim();

const WARNING = /\[⚠ ([^\]]+)\]/g;

/** The `[⚠ …]` notes display-safe rendering put in a summary (src/config/display-text.ts). */
export const summaryWarnings = (summary: string): string[] => [...summary.matchAll(WARNING)].map((match) => match[1] ?? '');

/**
 * The summary, escaped, within `max` characters: when it must be cut, its warnings are put back
 * after the cut, so a long summary cannot push a look-alike warning out of sight.
 */
export function fitSummary(card: Pick<ApprovalCard, 'summary' | 'warnings'>, max: number, escape: (text: string) => string = (text) => text): string {
  const whole = escape(card.summary);
  if (whole.length <= max) return whole;
  const tail = escape(card.warnings.map((warning) => ` [⚠ ${warning}]`).join(''));
  const room = tail.length < max / 2 ? max - tail.length - 1 : max - 1;
  return `${whole.slice(0, room)}…${room === max - 1 ? '' : tail}`;
}

export const toneOf = (view: Pick<ProposalMessageView, 'status' | 'error'>): CardTone => (isFailedExecution(view) ? 'failed' : view.status);

const text = (value: string): CardInline => ({ type: 'text', text: value });
const strong = (value: string): CardInline => ({ type: 'strong', text: value });

function deciderOf(view: ProposalMessageView, words: CardWords): CardInline {
  return view.decision ? { type: 'identity', identity: view.decision.by } : text(words.status.someone);
}

/** The status line: the state, who put it there, and what the reader may need next. */
function statusLines(view: ProposalMessageView, words: CardWords): CardLine[] {
  const tone = toneOf(view);
  const state = strong(words.states[tone]);
  const by = deciderOf(view, words);
  const count = words.approvalsCount(view.approvals.length, view.quorum);
  switch (tone) {
    case 'pending': {
      const missing = Math.max(0, view.quorum - view.approvals.length);
      const line: CardText = [state, text(`: ${words.status.waiting(missing, count)}`)];
      if (view.reminders) line.push(text(`; ${words.status.reminded(view.reminders)}`));
      if (view.escalatedAt) line.push(text(`; ${words.status.escalated} `), { type: 'time', at: view.escalatedAt, style: 'relative' });
      return [{ tone, text: line }];
    }
    case 'approved':
      return [{ tone, text: [state, text(` ${words.status.decidedBy} `), by, text(`: ${words.status.awaitingExecution}`)] }];
    case 'executing':
      return [{ tone, text: [state, text(`: ${words.status.executingApprovedBy} `), by] }];
    case 'committed':
      // The result only as the operation chose to show it (chat/result-text.ts); all of it is in the console.
      return [{ tone, text: view.result === null ? [state] : [state, text(': '), { type: 'verbatim', text: view.result }] }];
    case 'rejected': {
      const reason = view.decision?.reason ? oneLine(view.decision.reason) : '';
      const why: CardText = reason ? [text(': '), { type: 'value', text: reason }] : [text(` (${words.status.noReason})`)];
      return [{ tone, text: [state, text(` ${words.status.decidedBy} `), by, ...why] }];
    }
    case 'expired':
      return [{ tone, text: [state, text(`: ${words.status.expired(count)}`)] }];
    case 'cancelled':
      return [{ tone, text: [state, text(` ${words.status.cancelled}`)] }];
    case 'failed': {
      const [before, retry, after] = words.status.retryHint;
      return [
        { tone, text: [state, text(': '), { type: 'verbatim', text: view.error ?? '' }] },
        { tone: null, text: [text(before), strong(retry), text(after)] },
      ];
    }
  }
}

function fieldsOf(view: ProposalMessageView, words: CardWords): CardField[] {
  const approvers: CardText = view.approvals.flatMap((approval, i): CardText => [
    text(i === 0 ? ': ' : ', '),
    { type: 'identity', identity: approval.approver },
  ]);
  const expiryLabel = view.status === 'pending' ? words.fields.expires : view.status === 'expired' ? words.fields.expired : words.fields.expiry;
  return [
    { id: 'agent', label: words.fields.agent, value: [{ type: 'value', text: view.agent }] },
    { id: 'confirmationType', label: words.fields.confirmationType, value: [text(view.confirmationType)] },
    ...(view.cost ? [{ id: 'cost' as const, label: words.fields.cost, value: [{ type: 'value' as const, text: view.cost }] }] : []),
    { id: 'expiry', label: expiryLabel, value: [{ type: 'time', at: view.expiresAt, style: view.status === 'pending' ? 'relative' : 'absolute' }] },
    { id: 'approvals', label: words.fields.approvals, value: [text(words.approvalsCount(view.approvals.length, view.quorum)), ...approvers] },
    { id: 'proposal', label: words.fields.proposal, value: [{ type: 'code', text: view.id }] },
  ];
}

function actionsOf(view: ProposalMessageView, tone: CardTone, words: CardWords, layout: ApprovalCard['layout']): CardAction[] {
  const confirm = (title: string, label: string): Pick<CardAction, 'confirm'> =>
    view.confirmationType === 'payment' ? { confirm: { title, text: view.summary, confirm: label, deny: words.actions.cancel } } : {};
  const actions: CardAction[] = [];
  // A rule's or a grant's decision has nothing for a human to press; nor has a final proposal.
  if (layout === 'full' && tone === 'pending') {
    actions.push({ id: 'approve', label: words.actions.approve, style: 'primary', ...confirm(words.actions.confirmApprovePayment, words.actions.approve) });
    const first = view.grantDurationsMs?.[0];
    if (first !== undefined) actions.push({ id: 'grant', label: words.actions.grant(first), style: 'default' });
    actions.push({ id: 'reject', label: words.actions.reject, style: 'danger' });
  }
  if (layout === 'full' && tone === 'failed') {
    actions.push({ id: 'retry', label: words.actions.retry, style: 'primary', ...confirm(words.actions.confirmRetryPayment, words.actions.retry) });
  }
  if (view.consoleUrl) actions.push({ id: 'open', label: words.actions.open(view.id), style: 'default', url: view.consoleUrl });
  return actions;
}

/** The one line of a decision by a rule or a grant: which, why, for whom. */
function automaticLine(view: ProposalMessageView, decision: NonNullable<ProposalMessageView['decision']>, words: CardWords): CardLine {
  const denied = view.status === 'rejected';
  const byGrant = decision.by.startsWith('grant:');
  const reason = decision.reason ? [text(' ('), { type: 'value' as const, text: oneLine(decision.reason) }, text(')')] : [];
  return {
    tone: denied ? 'rejected' : 'committed',
    text: [
      { type: 'code', text: view.id },
      text(` ${denied ? words.automatic.denied : words.automatic.approved} ${byGrant ? words.automatic.byGrant : words.automatic.byRule} `),
      { type: 'code', text: byGrant ? decision.by.slice('grant:'.length) : decision.by },
      ...reason,
      text(` ${words.automatic.forAgent} `),
      { type: 'value', text: view.agent },
      text('.'),
    ],
  };
}

export interface ApprovalCardOptions {
  /** The words to use: the defaults unless a test (or, one day, a translation) hands in others. */
  words?: CardWords;
  /**
   * Whether a decision by a rule or a grant gets the compact layout (chat, where it is one line
   * among many). The console's page of a proposal always wants every field.
   */
  compact?: boolean;
}

/** The card of a proposal: every word any channel shows about it. */
export function approvalCard(view: ProposalMessageView, options: ApprovalCardOptions = {}): ApprovalCard {
  const words = options.words ?? CARD_WORDS;
  const tone = toneOf(view);
  const automatic = options.compact !== false && view.decision && isAutomaticDecider(view.decision.by) && view.approvals.length === 0 ? view.decision : null;
  const layout = automatic ? 'compact' : 'full';
  let status = statusLines(view, words);
  let notification = `${view.operation} (${words.states[tone]}): ${view.summary}`;
  if (automatic) {
    const denied = view.status === 'rejected';
    // The outcome follows once there is one worth telling: executing, committed, or a failure.
    const outcome = denied || tone === 'approved' ? [] : status;
    status = [automaticLine(view, automatic, words), ...outcome];
    notification = `${view.operation} ${denied ? words.automatic.denied : words.automatic.approved}: ${view.summary}`;
  }
  return {
    proposalId: view.id,
    layout,
    title: view.operation,
    subtitle: view.description,
    tone,
    state: words.states[tone],
    summary: view.summary,
    warnings: summaryWarnings(view.summary),
    labels: { status: words.fields.status, subtitle: words.fields.operation },
    status,
    fields: layout === 'full' ? fieldsOf(view, words) : [],
    actions: actionsOf(view, tone, words, layout),
    notification,
  };
}

/** A reminder or an escalation, as one line: who is asked, what waits, until when. */
export interface FollowUpCard {
  kind: ChatFollowUp['kind'];
  /** The people and roles asked, in the order configured; a converter decides which it may ping. */
  mention: readonly string[];
  text: CardText;
}

export function followUpCard(
  view: ProposalMessageView,
  followUp: { kind: ChatFollowUp['kind']; mention: readonly string[] },
  words: CardWords = CARD_WORDS,
): FollowUpCard {
  const w = words.followUp;
  const who: CardText =
    followUp.mention.length === 0
      ? [text(w.nobodyNamed)]
      : followUp.mention.flatMap((identity, i): CardText => [...(i === 0 ? [] : [text(' ')]), { type: 'identity', identity }]);
  const missing = Math.max(0, view.quorum - view.approvals.length);
  const what: CardText = [
    strong(view.operation),
    text(' ('),
    { type: 'code', text: view.id },
    text(`) ${w.by} `),
    { type: 'value', text: view.agent },
    text(w.waits(missing)),
    { type: 'time', at: view.expiresAt, style: 'relative' },
    text(w.doesNotRun),
  ];
  const link: CardText = view.consoleUrl ? [text(' '), { type: 'link', text: w.open, url: view.consoleUrl }] : [];
  const head = followUp.kind === 'remind' ? [text(`${w.reminder} `), ...who, text(': ')] : [text(`${w.escalated} `), ...who, text(`${w.escalatedWho}: `)];
  return { kind: followUp.kind, mention: followUp.mention, text: [...head, ...what, ...link] };
}
