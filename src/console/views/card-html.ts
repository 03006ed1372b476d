import type { ApprovalCard, CardField, CardFieldId, CardText } from '../../chat/card.js';
import type { ProposalMessageView } from '../../chat/types.js';
import { html, type SafeHtml } from '../html.js';
import { countdown, statusBadge, timeTag } from '../layout.js';
import type { ProposalItem } from './proposal-item.js';

/**
 * The approval card (src/chat/card.ts) as the console's HTML: the same words as Slack and Discord,
 * escaped by `html` (every value an agent or a person chose is text, never markup). The console adds
 * only what a browser page has and chat has not: the viewer's own forms, the params, a countdown.
 */

/** What the card needs of a console item; the console shows the whole result on the proposal's page. */
export function cardViewOf(item: ProposalItem): ProposalMessageView {
  const { proposal } = item;
  return {
    id: proposal.id,
    operation: proposal.operation,
    description: item.description,
    summary: proposal.summary,
    agent: item.agentName,
    confirmationType: proposal.confirmationType,
    cost: proposal.cost,
    expiresAt: proposal.expiresAt,
    status: proposal.status,
    quorum: proposal.quorum,
    approvals: item.approvals.map((approval) => ({ approver: approval.approver, at: approval.at })),
    decision: proposal.decidedBy && proposal.decidedAt ? { by: proposal.decidedBy, at: proposal.decidedAt, reason: proposal.decisionReason } : null,
    result: null,
    error: proposal.error,
    reminders: proposal.reminders,
    escalatedAt: proposal.escalatedAt,
    grantDurationsMs: [...item.grantDurationsMs],
    // The console links inside itself: the card's "open" action is the summary's link.
    consoleUrl: `/console/proposals/${proposal.id}`,
    trail: [],
  };
}

export function cardHtml(text: CardText): SafeHtml {
  return html`${text.map((piece) => {
    switch (piece.type) {
      case 'text':
      case 'value':
        return piece.text;
      case 'strong':
        return html`<strong>${piece.text}</strong>`;
      case 'verbatim':
      case 'code':
        return html`<code>${piece.text}</code>`;
      case 'identity':
        return piece.identity;
      case 'time':
        return timeTag(piece.at);
      case 'link':
        return html`<a href="${piece.url}">${piece.text}</a>`;
    }
  })}`;
}

export const cardField = (card: ApprovalCard, id: CardFieldId): CardField | undefined => card.fields.find((field) => field.id === id);

/** The status line as a wide fact: who decided, the reason, the result or the error. */
export function statusFact(card: ApprovalCard): SafeHtml {
  return html`<div class="fact-wide status-line"><dt>${card.labels.status}</dt>${card.status.map(
    (line) => html`<dd class="${line.tone === 'failed' ? 'error-text' : ''}">${cardHtml(line.text)}</dd>`,
  )}</div>`;
}

/** The card's fields as facts, in the card's order, with the subtitle ("Operation") after the agent. */
export function factsOf(card: ApprovalCard, shown: readonly CardFieldId[]): SafeHtml {
  const fact = (label: string, value: SafeHtml | string) => html`<div><dt>${label}</dt><dd>${value}</dd></div>`;
  return html`${card.fields
    .filter((field) => shown.includes(field.id))
    .map((field) => html`${fact(field.label, cardHtml(field.value))}${field.id === 'agent' ? fact(card.labels.subtitle, card.subtitle) : ''}`)}`;
}

/** The card's label of an action; empty when the card offers none (and the console shows no such button). */
export const actionLabel = (card: ApprovalCard, id: 'approve' | 'reject' | 'retry'): string => card.actions.find((action) => action.id === id)?.label ?? '';

/** The card's head: its state, the operation, the confirmation type, and while pending a countdown. */
export function cardHead(card: ApprovalCard, now: Date): SafeHtml {
  const type = cardField(card, 'confirmationType');
  const expiry = cardField(card, 'expiry')?.value.find((piece) => piece.type === 'time');
  return html`<div class="card-head">
    ${statusBadge(card.tone, card.state)}
    <span class="chip" title="operation">${card.title}</span>
    ${type ? html`<span class="chip chip-type">${cardHtml(type.value)}</span>` : ''}
    ${card.tone === 'pending' && expiry?.type === 'time' ? countdown(expiry.at, now) : ''}
  </div>`;
}

/** The card as a list item shows it: head, the summary linking to the proposal's page, the facts. */
export function cardToHtml(card: ApprovalCard, now: Date): SafeHtml {
  const open = card.actions.find((action) => action.id === 'open');
  return html`${cardHead(card, now)}
    <h2 class="summary" id="summary-${card.proposalId}"><a href="${open?.url ?? `/console/proposals/${card.proposalId}`}">${card.summary}</a></h2>
    <dl class="facts">
      ${factsOf(card, ['agent', 'cost', 'approvals'])} ${statusFact(card)}
    </dl>`;
}
