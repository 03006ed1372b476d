import {
  approvalCard,
  fitSummary,
  followUpCard,
  type ApprovalCard,
  type CardAction,
  type CardLine,
  type CardText,
  type CardTone,
  type FollowUpCard,
} from '../chat/card.js';
import type { ChatFollowUp, ProposalMessageView } from '../chat/types.js';

/**
 * The approval card (src/chat/card.ts) as a Microsoft Adaptive Card. Every word is the card's; this
 * adds the mechanics: `TextRun`s (which render no markdown, so agent-chosen text cannot format, link
 * or mention), Teams' size limits, a symbol per tone, and `Action.Execute` verbs carrying the
 * proposal id (never the token). Version 1.4 is the first with `Action.Execute` (Universal Actions).
 */

export type TeamsAction = 'approve' | 'reject' | 'retry' | 'grant';

/** The verb of a card button; the proposal id rides in its `data`. */
export const verbFor = (action: TeamsAction): string => `twokey.${action}`;
const VERB = /^twokey\.(approve|reject|retry|grant)$/;
export const parseVerb = (verb: unknown): TeamsAction | null => {
  const match = typeof verb === 'string' ? VERB.exec(verb) : null;
  return match?.[1] ? (match[1] as TeamsAction) : null;
};

/** The `Input.Text` of the reject form, read back from `action.data`. */
export const REASON_INPUT = 'reason';
export const REASON_PLACEHOLDER = 'Why? (optional, shown on the card)';
/** Teams refuses a message over about 28 KB; these keep a card well inside it. */
const LIMIT = { summary: 2_000, value: 600, reason: 500 } as const;

type Json = Record<string, unknown>;

const TONE_SYMBOL: Record<CardTone, string> = {
  pending: '⏳',
  approved: '✅',
  executing: '⚙️',
  committed: '✅',
  rejected: '❌',
  expired: '⌛',
  cancelled: '🚫',
  failed: '⚠️',
};

/** Adaptive Cards' own colours for the state's header: the state never relies on colour alone (it has its symbol). */
const TONE_COLOUR: Record<CardTone, string> = {
  pending: 'Warning',
  approved: 'Accent',
  executing: 'Accent',
  committed: 'Good',
  rejected: 'Attention',
  expired: 'Default',
  cancelled: 'Default',
  failed: 'Warning',
};

const oneLine = (text: string): string => text.replace(/\s+/g, ' ').trim();
const truncate = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/** A time as every reader sees it alike: Teams' own time formatting applies to a TextBlock's markdown only. */
const timeText = (at: Date): string => `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/** `teams:<object id>` and every other identity, as text: a card cannot ping. */
const identityText = (identity: string): string => identity;

function run(text: string, extra: Json = {}): Json {
  return { type: 'TextRun', text, ...extra };
}

/** A line of the card as runs: twokey's words plain, stress bold, machine text and ids monospace, links as links. */
export function teamsRuns(text: CardText): Json[] {
  return text.map((piece) => {
    switch (piece.type) {
      case 'text':
        return run(piece.text);
      case 'strong':
        return run(piece.text, { weight: 'Bolder' });
      case 'value':
        return run(truncate(oneLine(piece.text), LIMIT.value));
      case 'verbatim':
        return run(truncate(oneLine(piece.text), LIMIT.value), { fontType: 'Monospace' });
      case 'code':
        return run(piece.text, { fontType: 'Monospace' });
      case 'identity':
        return run(identityText(piece.identity));
      case 'time':
        return run(timeText(piece.at));
      case 'link':
        return run(piece.text, { selectAction: { type: 'Action.OpenUrl', url: piece.url } });
    }
  });
}

/** A line as plain text, for a notification's preview. */
const plainText = (text: CardText): string =>
  text
    .map((piece) =>
      piece.type === 'identity' ? identityText(piece.identity) : piece.type === 'time' ? timeText(piece.at) : piece.type === 'link' ? piece.text : piece.text,
    )
    .join('');

const richText = (runs: Json[], extra: Json = {}): Json => ({ type: 'RichTextBlock', inlines: runs, ...extra });

const lineBlock = (line: CardLine): Json => richText([...(line.tone ? [run(`${TONE_SYMBOL[line.tone]} `)] : []), ...teamsRuns(line.text)]);

const executeAction = (action: CardAction, teamsAction: TeamsAction, proposalId: string, extra: Json = {}): Json => ({
  type: 'Action.Execute',
  title: action.label,
  verb: verbFor(teamsAction),
  data: { proposalId },
  ...(action.style === 'primary' ? { style: 'positive' } : action.style === 'danger' ? { style: 'destructive' } : {}),
  ...extra,
});

/**
 * A button that asks first (a payment's approval, a reject's reason): Adaptive Cards have no confirm
 * dialog, so it opens a card under the message holding the question and the button that acts.
 */
const showCard = (title: string, body: Json[], actions: Json[], style?: string): Json => ({
  type: 'Action.ShowCard',
  title,
  ...(style ? { style } : {}),
  card: { type: 'AdaptiveCard', body, actions },
});

function cardActions(card: ApprovalCard): Json[] {
  return card.actions.map((action): Json => {
    switch (action.id) {
      case 'open':
        return { type: 'Action.OpenUrl', title: action.label, url: action.url };
      case 'reject':
        return showCard(
          action.label,
          [
            {
              type: 'Input.Text',
              id: REASON_INPUT,
              isMultiline: true,
              maxLength: LIMIT.reason,
              label: action.label,
              // The form's own words, as Slack's and Discord's reject forms have theirs.
              placeholder: REASON_PLACEHOLDER,
            },
          ],
          [executeAction(action, 'reject', card.proposalId)],
          'destructive',
        );
      case 'approve':
      case 'retry':
      case 'grant': {
        const execute = executeAction(action, action.id, card.proposalId, action.confirm ? { title: action.confirm.confirm } : {});
        if (!action.confirm) return execute;
        return showCard(
          action.label,
          [{ type: 'TextBlock', text: action.confirm.title, weight: 'Bolder', wrap: true }, richText([run(fitSummary(card, LIMIT.summary))])],
          [execute],
          'positive',
        );
      }
    }
  });
}

/** The card's fields as label and value side by side: the label is twokey's word, the value runs. */
function fieldRows(card: ApprovalCard): Json[] {
  return card.fields.map((field) => ({
    type: 'ColumnSet',
    spacing: 'Small',
    columns: [
      { type: 'Column', width: 'auto', items: [{ type: 'TextBlock', text: field.label, weight: 'Bolder', wrap: true }] },
      { type: 'Column', width: 'stretch', items: [richText(teamsRuns(field.value))] },
    ],
  }));
}

/** The card as an Adaptive Card (an attachment's `content`). */
export function cardToAdaptiveCard(card: ApprovalCard): Json {
  const header: Json[] = [
    richText([
      run(`${TONE_SYMBOL[card.tone]} `),
      run(card.title, { weight: 'Bolder', size: 'Medium' }),
      run(` · ${card.state}`, { color: TONE_COLOUR[card.tone] }),
    ]),
  ];
  const body: Json[] =
    card.layout === 'compact'
      ? [...header, ...card.status.map(lineBlock)]
      : [
          ...header,
          richText([run(card.subtitle, { isSubtle: true })]),
          richText([run(fitSummary(card, LIMIT.summary))], { spacing: 'Medium' }),
          { type: 'TextBlock', text: card.labels.status, weight: 'Bolder', spacing: 'Medium', wrap: true },
          ...card.status.map(lineBlock),
          ...fieldRows(card),
        ];
  return {
    type: 'AdaptiveCard',
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    version: '1.4',
    // Teams stretches a card to the message's width only when asked.
    msteams: { width: 'Full' },
    fallbackText: card.notification,
    body,
    actions: cardActions(card),
  };
}

export const ADAPTIVE_CARD = 'application/vnd.microsoft.card.adaptive';

/** The message activity of a proposal: its card, and the card's one line for notifications. */
export function renderActivity(view: ProposalMessageView): Json {
  const card = approvalCard(view);
  return {
    type: 'message',
    summary: truncate(card.notification, 200),
    attachments: [{ contentType: ADAPTIVE_CARD, content: cardToAdaptiveCard(card) }],
  };
}

/** A reminder or an escalation as a small card of its own: one line of runs, nothing to press. */
export function followUpToTeams(card: FollowUpCard): Json {
  return {
    type: 'AdaptiveCard',
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    version: '1.4',
    body: [richText(teamsRuns(card.text))],
  };
}

export function renderFollowUp(view: ProposalMessageView, followUp: Pick<ChatFollowUp, 'kind' | 'mention'>): Json {
  const card = followUpCard(view, followUp);
  return {
    type: 'message',
    summary: truncate(plainText(card.text), 200),
    attachments: [{ contentType: ADAPTIVE_CARD, content: followUpToTeams(card) }],
  };
}
