import type { types } from '@slack/bolt';
import type { ProposalMessageView } from '../chat/types.js';
import { isFailedExecution } from '../core/outcome.js';
import { durationLabel } from '../lib/duration.js';

/** The action and callback ids Slack sends back; docs/api.md (Chat endpoints) fixes the first two. */
export const APPROVE_ACTION = 'twokey_approve';
export const REJECT_ACTION = 'twokey_reject';
export const RETRY_ACTION = 'twokey_retry';
export const REJECT_MODAL = 'twokey_reject_modal';
export const REASON_BLOCK = 'twokey_reason';
export const REASON_INPUT = 'twokey_reason_input';
export const GRANT_ACTION = 'twokey_grant';
export const GRANT_MODAL = 'twokey_grant_modal';
export const GRANT_DURATION_BLOCK = 'twokey_grant_duration';
export const GRANT_USES_BLOCK = 'twokey_grant_uses';
export const GRANT_BOUNDED_BLOCK = 'twokey_grant_bounded';
export const GRANT_INPUT = 'twokey_grant_input';

/** Block Kit's own limits; past them Slack refuses the whole message (`invalid_blocks`). */
const LIMITS = { header: 150, sectionText: 3000, field: 2000, confirmText: 300, buttonValue: 2000, reason: 500 } as const;

export interface SlackMessage {
  /** Notification and screen-reader text; also what old clients show. */
  text: string;
  blocks: types.KnownBlock[];
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * Escapes the three characters Slack's mrkdwn treats as control characters. Without it, params an
 * agent chose (and so the summary) could carry `<!channel>` or a disguised `<https://evil|link>`.
 */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** `slack:U123` → a mention; `slack:group:S1` → a user-group mention; anything else as text. */
export function formatIdentity(identity: string): string {
  const group = /^slack:group:(S[A-Z0-9]+)$/.exec(identity);
  if (group) return `<!subteam^${group[1]}>`;
  const user = /^slack:([UW][A-Z0-9]+)$/.exec(identity);
  if (user) return `<@${user[1]}>`;
  if (identity === 'system') return 'twokey';
  return escapeMrkdwn(identity);
}

/** Slack renders this in each reader's own time zone; the fallback is for clients that cannot. */
export function slackDate(date: Date): string {
  const unix = Math.floor(date.getTime() / 1000);
  const fallback = `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  return `<!date^${unix}^{date_short_pretty} {time}|${fallback}>`;
}

function plain(text: string): types.PlainTextElement {
  return { type: 'plain_text', text, emoji: true };
}

function mrkdwn(text: string): types.MrkdwnElement {
  return { type: 'mrkdwn', text };
}

function oneLine(text: string): string {
  return truncate(text.replace(/\s+/g, ' '), 300);
}

const failedExecution = (view: ProposalMessageView) => isFailedExecution(view);

function headline(view: ProposalMessageView): string {
  if (failedExecution(view)) return 'execution failed';
  switch (view.status) {
    case 'pending':
      return 'approval needed';
    case 'approved':
      return 'approved';
    case 'executing':
      return 'executing';
    case 'committed':
      return 'committed';
    case 'rejected':
      return 'rejected';
    case 'expired':
      return 'expired';
    case 'cancelled':
      return 'cancelled';
  }
}

const STATUS_EMOJI: Record<ProposalMessageView['status'], string> = {
  pending: ':hourglass_flowing_sand:',
  approved: ':large_green_circle:',
  executing: ':gear:',
  committed: ':white_check_mark:',
  rejected: ':no_entry:',
  expired: ':hourglass:',
  cancelled: ':heavy_multiplication_x:',
};

/** One line saying where the proposal stands and who put it there. */
function statusLine(view: ProposalMessageView): string {
  const by = view.decision ? formatIdentity(view.decision.by) : 'someone';
  if (failedExecution(view)) {
    return `:warning: *Execution failed:* ${escapeMrkdwn(truncate(view.error ?? '', 1000))}\nThe approval stands and the confirmation token is unused: *Retry* runs the operation again.`;
  }
  switch (view.status) {
    case 'pending': {
      const missing = Math.max(0, view.quorum - view.approvals.length);
      const reminded = view.reminders ? ` Reminded ${view.reminders}×.` : '';
      const escalated = view.escalatedAt ? ` Escalated ${slackDate(view.escalatedAt)}.` : '';
      return `${STATUS_EMOJI.pending} Waiting for ${missing} more approval${missing === 1 ? '' : 's'}.${reminded}${escalated}`;
    }
    case 'approved':
      return `${STATUS_EMOJI.approved} *Approved* by ${by}.`;
    case 'executing':
      return `${STATUS_EMOJI.executing} *Approved* by ${by}; executing…`;
    case 'committed':
      // The result only as the operation chose to show it (docs/slack.md); the whole of it is in the console.
      return `${STATUS_EMOJI.committed} *Committed.*${view.result === null ? '' : ` Result: ${escapeMrkdwn(oneLine(view.result))}`}`;
    case 'rejected': {
      const reason = view.decision?.reason;
      return `${STATUS_EMOJI.rejected} *Rejected* by ${by}${reason ? `: “${escapeMrkdwn(reason)}”` : ' (no reason given)'}.`;
    }
    case 'expired':
      return `${STATUS_EMOJI.expired} *Expired* before enough approvals arrived. Nothing was run.`;
    case 'cancelled':
      return `${STATUS_EMOJI.cancelled} *Cancelled* by the agent. Nothing was run.`;
  }
}

function approvalsText(view: ProposalMessageView): string {
  const names = view.approvals.map((a) => formatIdentity(a.approver)).join(', ');
  return `${view.approvals.length} of ${view.quorum}${names ? `: ${names}` : ''}`;
}

function approveButton(view: ProposalMessageView, actionId: string, label: string): types.Button {
  const button: types.Button = { type: 'button', action_id: actionId, text: plain(label), style: 'primary', value: view.id };
  // A payment is the one decision worth a second look before it leaves the channel.
  if (view.confirmationType === 'payment') {
    button.confirm = {
      title: plain(actionId === RETRY_ACTION ? 'Retry this payment?' : 'Approve this payment?'),
      // plain_text like the summary section: nothing the agent chose may format the last look before a payment.
      text: { type: 'plain_text', text: truncate(view.summary, LIMITS.confirmText), emoji: false },
      confirm: plain(label),
      deny: plain('Cancel'),
      style: 'primary',
    };
  }
  return button;
}

function actions(view: ProposalMessageView): types.ActionsBlock | null {
  if (view.status === 'pending') {
    return {
      type: 'actions',
      block_id: 'twokey_decision',
      elements: [
        approveButton(view, APPROVE_ACTION, 'Approve'),
        ...(view.grantDurationsMs && view.grantDurationsMs.length > 0
          ? [{ type: 'button' as const, action_id: GRANT_ACTION, text: plain(`Approve for ${durationLabel(view.grantDurationsMs[0] ?? 0)}…`), value: view.id }]
          : []),
        { type: 'button', action_id: REJECT_ACTION, text: plain('Reject'), style: 'danger', value: view.id },
      ],
    };
  }
  if (failedExecution(view)) {
    return { type: 'actions', block_id: 'twokey_retry', elements: [approveButton(view, RETRY_ACTION, 'Retry')] };
  }
  // Any other state has nothing left for a human to decide: no buttons.
  return null;
}

/**
 * The proposal message (docs/slack.md). Renders only what twokey wrote: the summary comes from the
 * operation's template, the button values are the proposal id, and the token is never in the view.
 */
export function renderProposalMessage(view: ProposalMessageView): SlackMessage {
  if (view.decision && /^(policy|grant):/.test(view.decision.by) && view.approvals.length === 0) return renderAutomaticDecision(view, view.decision);
  const fields: types.MrkdwnElement[] = [
    mrkdwn(`*Agent*\n${escapeMrkdwn(view.agent)}`),
    mrkdwn(`*Confirmation type*\n${view.confirmationType}`),
    ...(view.cost ? [mrkdwn(`*Cost*\n${escapeMrkdwn(view.cost)}`)] : []),
    mrkdwn(`*${view.status === 'expired' ? 'Expired' : 'Expires'}*\n${slackDate(view.expiresAt)}`),
    mrkdwn(`*Approvals*\n${approvalsText(view)}`),
    mrkdwn(`*Proposal*\n\`${escapeMrkdwn(view.id)}\``),
  ].map((field) => ({ ...field, text: truncate(field.text, LIMITS.field) }));

  const blocks: types.KnownBlock[] = [{ type: 'header', text: plain(truncate(`${view.operation}: ${headline(view)}`, LIMITS.header)) }];
  if (view.description) blocks.push({ type: 'context', elements: [plain(truncate(view.description, LIMITS.field))] });
  // plain_text: the summary embeds agent-chosen params, so nothing in it may format, link or mention.
  blocks.push({ type: 'section', text: { type: 'plain_text', text: truncate(view.summary, LIMITS.sectionText), emoji: false } });
  blocks.push({ type: 'section', fields });
  blocks.push({ type: 'section', text: mrkdwn(truncate(statusLine(view), LIMITS.sectionText)) });
  const buttons = actions(view);
  if (buttons) blocks.push(buttons);
  if (view.consoleUrl) {
    blocks.push({ type: 'context', elements: [mrkdwn(`<${view.consoleUrl}|Open proposal ${escapeMrkdwn(view.id)} in the twokey console>`)] });
  }
  return {
    text: truncate(`${view.operation} (${headline(view)}): ${escapeMrkdwn(view.summary)}`, LIMITS.sectionText),
    blocks,
  };
}

/**
 * A decision no human made (a policy rule or a grant): one compact message, never buttons, saying
 * which rule or grant decided and why, then the outcome as it changes.
 */
function renderAutomaticDecision(view: ProposalMessageView, decision: NonNullable<ProposalMessageView['decision']>): SlackMessage {
  const denied = view.status === 'rejected';
  const verb = denied ? 'auto-denied' : 'auto-approved';
  const by = decision.by.startsWith('grant:') ? `grant \`${escapeMrkdwn(decision.by.slice(6))}\`` : `rule \`${escapeMrkdwn(decision.by)}\``;
  const why = decision.reason ? ` (${escapeMrkdwn(truncate(decision.reason, 300))})` : '';
  const outcome = denied || (view.status === 'approved' && !failedExecution(view)) ? '' : `\n${statusLine(view)}`;
  const head = `${denied ? STATUS_EMOJI.rejected : STATUS_EMOJI.committed} *${escapeMrkdwn(view.operation)}* (\`${escapeMrkdwn(view.id)}\`) ${verb} by ${by}${why} for ${escapeMrkdwn(view.agent)}.`;
  const blocks: types.KnownBlock[] = [
    { type: 'section', text: mrkdwn(truncate(`${head}${outcome}`, LIMITS.sectionText)) },
    { type: 'context', elements: [{ type: 'plain_text', text: truncate(view.summary, LIMITS.field), emoji: false }] },
  ];
  return { text: truncate(`${view.operation} ${verb}: ${escapeMrkdwn(view.summary)}`, LIMITS.sectionText), blocks };
}

/** A reminder or an escalation: who is asked, what waits, until when. */
export function renderFollowUp(view: ProposalMessageView, followUp: { kind: 'remind' | 'escalate'; mention: string[] }): string {
  const who = followUp.mention.map(formatIdentity).join(' ');
  const missing = Math.max(0, view.quorum - view.approvals.length);
  const what = `*${escapeMrkdwn(view.operation)}* (\`${escapeMrkdwn(view.id)}\`) by ${escapeMrkdwn(view.agent)} still waits for ${missing} approval${missing === 1 ? '' : 's'}; it expires ${slackDate(view.expiresAt)} and then does not run.`;
  const link = view.consoleUrl ? ` <${view.consoleUrl}|Open it>` : '';
  return followUp.kind === 'remind' ? `:bell: Reminder ${who}: ${what}${link}` : `:rotating_light: Escalated to ${who}, who may now decide: ${what}${link}`;
}

/** The decision trail, posted once as a thread reply when the proposal is final. */
export function renderTrail(view: ProposalMessageView): string {
  const header = `*Decision trail* of \`${escapeMrkdwn(view.id)}\``;
  // Keep the newest lines when the trail is long: the decision is at the end.
  const lines: string[] = [];
  let length = header.length + 8;
  for (const line of [...view.trail].reverse()) {
    const escaped = escapeMrkdwn(line);
    if (length + escaped.length + 1 > LIMITS.sectionText) break;
    lines.unshift(escaped);
    length += escaped.length + 1;
  }
  return `${header}\n\`\`\`${lines.join('\n') || 'no events'}\`\`\``;
}

/**
 * The modal "Approve for…" opens: this proposal is approved, and the same operation of the same
 * agent for the chosen time, optionally for a number of uses and only up to this proposal's params.
 */
export function grantModal(proposal: { id: string; operation: string; summary: string }, durationsMs: readonly number[]): types.ModalView {
  const options = durationsMs.map((ms) => ({ text: plain(durationLabel(ms)), value: String(ms) }));
  return {
    type: 'modal',
    callback_id: GRANT_MODAL,
    private_metadata: proposal.id,
    title: plain('Approve for a while'),
    submit: plain('Approve'),
    close: plain('Cancel'),
    blocks: [
      { type: 'section', text: { type: 'plain_text', text: truncate(`${proposal.operation}: ${proposal.summary}`, LIMITS.sectionText), emoji: false } },
      {
        type: 'input',
        block_id: GRANT_DURATION_BLOCK,
        label: plain('Approve this, and the same operation of this agent, for'),
        element: { type: 'static_select', action_id: GRANT_INPUT, options, ...(options[0] ? { initial_option: options[0] } : {}) },
      },
      {
        type: 'input',
        block_id: GRANT_USES_BLOCK,
        optional: true,
        label: plain('At most this many proposals (empty: no limit)'),
        element: { type: 'number_input', action_id: GRANT_INPUT, is_decimal_allowed: false, min_value: '1', max_value: '10000' },
      },
      {
        type: 'input',
        block_id: GRANT_BOUNDED_BLOCK,
        optional: true,
        label: plain('Bounds'),
        element: {
          type: 'checkboxes',
          action_id: GRANT_INPUT,
          options: [
            {
              text: plain("Amounts up to this proposal's, other params as in it"),
              description: plain('A param this proposal lacks must stay absent.'),
              value: 'bounded',
            },
          ],
        },
      },
    ],
  };
}

/** The modal a Reject click opens. `private_metadata` carries the proposal id back on submission. */
export function rejectModal(proposal: { id: string; operation: string; summary: string }): types.ModalView {
  return {
    type: 'modal',
    callback_id: REJECT_MODAL,
    private_metadata: proposal.id,
    title: plain('Reject proposal'),
    submit: plain('Reject'),
    close: plain('Cancel'),
    blocks: [
      { type: 'section', text: { type: 'plain_text', text: truncate(`${proposal.operation}: ${proposal.summary}`, LIMITS.sectionText), emoji: false } },
      {
        type: 'input',
        block_id: REASON_BLOCK,
        optional: true,
        label: plain('Reason (the agent sees it)'),
        element: {
          type: 'plain_text_input',
          action_id: REASON_INPUT,
          multiline: true,
          max_length: LIMITS.reason,
          placeholder: plain('Why not?'),
        },
      },
    ],
  };
}
