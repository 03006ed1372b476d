import type { types } from '@slack/bolt';
import {
  approvalCard,
  fitSummary,
  followUpCard,
  type ApprovalCard,
  type CardAction,
  type CardActionId,
  type CardLine,
  type CardText,
  type CardTone,
  type FollowUpCard,
} from '../chat/card.js';
import type { ProposalMessageView } from '../chat/types.js';
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

/** Each tone's symbol, so a state never relies on words alone in a busy channel. */
const TONE_EMOJI: Record<CardTone, string> = {
  pending: ':hourglass_flowing_sand:',
  approved: ':large_green_circle:',
  executing: ':gear:',
  committed: ':white_check_mark:',
  rejected: ':no_entry:',
  expired: ':hourglass:',
  cancelled: ':heavy_multiplication_x:',
  failed: ':warning:',
};

/** A card's line as mrkdwn: every piece escaped; only twokey's own markup formats. */
export function slackText(text: CardText): string {
  return text
    .map((piece) => {
      switch (piece.type) {
        case 'text':
        case 'value':
          return escapeMrkdwn(piece.text);
        case 'verbatim':
          return escapeMrkdwn(truncate(piece.text.replace(/\s+/g, ' '), 1000));
        case 'strong':
          return `*${escapeMrkdwn(piece.text)}*`;
        case 'code':
          return `\`${escapeMrkdwn(piece.text)}\``;
        case 'identity':
          return formatIdentity(piece.identity);
        case 'time':
          return slackDate(piece.at);
        case 'link':
          return `<${piece.url}|${escapeMrkdwn(piece.text)}>`;
      }
    })
    .join('');
}

const lineText = (line: CardLine): string => `${line.tone ? `${TONE_EMOJI[line.tone]} ` : ''}${slackText(line.text)}`;

/** The action ids Slack sends back; `open` is a link, not a button. */
const ACTION_IDS: Partial<Record<CardActionId, string>> = { approve: APPROVE_ACTION, grant: GRANT_ACTION, reject: REJECT_ACTION, retry: RETRY_ACTION };

function button(card: ApprovalCard, action: CardAction, actionId: string): types.Button {
  const element: types.Button = { type: 'button', action_id: actionId, text: plain(action.label), value: card.proposalId };
  if (action.style !== 'default') element.style = action.style;
  if (action.confirm) {
    element.confirm = {
      title: plain(action.confirm.title),
      // plain_text like the summary section: nothing the agent chose may format the last look before a payment.
      text: { type: 'plain_text', text: fitSummary({ summary: action.confirm.text, warnings: card.warnings }, LIMITS.confirmText), emoji: false },
      confirm: plain(action.confirm.confirm),
      deny: plain(action.confirm.deny),
      style: 'primary',
    };
  }
  return element;
}

function actions(card: ApprovalCard): types.ActionsBlock | null {
  const buttons = card.actions.flatMap((action) => {
    const actionId = ACTION_IDS[action.id];
    return actionId ? [button(card, action, actionId)] : [];
  });
  if (buttons.length === 0) return null;
  return { type: 'actions', block_id: card.tone === 'failed' ? 'twokey_retry' : 'twokey_decision', elements: buttons };
}

/**
 * The proposal message (docs/slack.md). Renders only what twokey wrote: the summary comes from the
 * operation's template, the button values are the proposal id, and the token is never in the view.
 */
export function renderProposalMessage(view: ProposalMessageView): SlackMessage {
  return cardToBlockKit(approvalCard(view));
}

/** The card as Block Kit: layout, escaping and Slack's limits; the words are the card's. */
export function cardToBlockKit(card: ApprovalCard): SlackMessage {
  if (card.layout === 'compact') return compactMessage(card);
  const fields = card.fields.map((field) => mrkdwn(truncate(`*${escapeMrkdwn(field.label)}*\n${slackText(field.value)}`, LIMITS.field)));
  const blocks: types.KnownBlock[] = [{ type: 'header', text: plain(truncate(`${card.title}: ${card.state}`, LIMITS.header)) }];
  if (card.subtitle) blocks.push({ type: 'context', elements: [plain(truncate(card.subtitle, LIMITS.field))] });
  // plain_text: the summary embeds agent-chosen params, so nothing in it may format, link or mention.
  blocks.push({ type: 'section', text: { type: 'plain_text', text: fitSummary(card, LIMITS.sectionText), emoji: false } });
  blocks.push({ type: 'section', fields });
  blocks.push({ type: 'section', text: mrkdwn(truncate(card.status.map(lineText).join('\n'), LIMITS.sectionText)) });
  const buttons = actions(card);
  if (buttons) blocks.push(buttons);
  const open = card.actions.find((action) => action.id === 'open' && action.url);
  if (open?.url) blocks.push({ type: 'context', elements: [mrkdwn(slackText([{ type: 'link', text: open.label, url: open.url }]))] });
  return { text: truncate(escapeMrkdwn(card.notification), LIMITS.sectionText), blocks };
}

/** A decision no human made: one section, never buttons, then the summary as plain text. */
function compactMessage(card: ApprovalCard): SlackMessage {
  const [head, ...outcome] = card.status;
  const first = head ? `${head.tone ? `${TONE_EMOJI[head.tone]} ` : ''}*${escapeMrkdwn(card.title)}* ${slackText(head.text)}` : '';
  const blocks: types.KnownBlock[] = [
    { type: 'section', text: mrkdwn(truncate([first, ...outcome.map(lineText)].join('\n'), LIMITS.sectionText)) },
    { type: 'context', elements: [{ type: 'plain_text', text: fitSummary(card, LIMITS.field), emoji: false }] },
  ];
  return { text: truncate(escapeMrkdwn(card.notification), LIMITS.sectionText), blocks };
}

/** A reminder or an escalation: who is asked, what waits, until when. */
export function renderFollowUp(view: ProposalMessageView, followUp: { kind: 'remind' | 'escalate'; mention: string[] }): string {
  return followUpToSlack(followUpCard(view, followUp));
}

export const followUpToSlack = (card: FollowUpCard): string => `${card.kind === 'remind' ? ':bell:' : ':rotating_light:'} ${slackText(card.text)}`;

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
