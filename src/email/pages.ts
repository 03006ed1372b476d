import type { ApprovalCard } from '../chat/card.js';
import { html, type HtmlValue, type SafeHtml } from '../console/html.js';
import { notice, page } from '../console/layout.js';
import { cardHead, factsOf, statusFact } from '../console/views/card-html.js';
import { DECIDE_PATH, type LinkAction } from './links.js';

/** Why a link opens nothing: each says what happened and what the person can do instead. */
export type LinkProblem = 'malformed' | 'unknown' | 'other_proposal' | 'used' | 'expired' | 'changed' | 'cross_site' | 'bad_form';

export const LINK_PROBLEMS: Record<LinkProblem, { status: number; text: string }> = {
  malformed: { status: 404, text: 'This link is not a valid twokey link. Check that your mail client did not cut it.' },
  unknown: { status: 404, text: 'This link is not known to twokey. It may have been cut, or the proposal removed.' },
  other_proposal: { status: 404, text: 'This link was made for another proposal. Use the link in the mail about this one.' },
  used: { status: 410, text: 'This link was already used. Each link decides once; the outcome was mailed to you.' },
  expired: { status: 410, text: 'This link has expired with its proposal. Nothing was decided through it.' },
  changed: { status: 409, text: 'This proposal is no longer the one the link was made for, so the link decides nothing.' },
  cross_site: { status: 403, text: 'This form was sent from another site and was refused. Open the link from your mail instead.' },
  bad_form: { status: 400, text: 'The form was incomplete: it needs its token, proposal and action. Open the link from your mail again.' },
};

export function emailPage(title: string, body: HtmlValue, now: Date): string {
  return page({ title, viewer: null, section: 'none', now, body }).value;
}

function cardSection(card: ApprovalCard, now: Date, extra: HtmlValue = ''): SafeHtml {
  return html`<article class="card detail" data-id="${card.proposalId}">
    ${cardHead(card, now)}
    <h1 class="summary" id="summary-${card.proposalId}">${card.summary}</h1>
    <dl class="facts">${factsOf(card, ['agent', 'cost', 'expiry', 'approvals', 'proposal'])} ${statusFact(card)}</dl>
    ${extra}
  </article>`;
}

const consoleLink = (card: ApprovalCard): SafeHtml => {
  const open = card.actions.find((action) => action.id === 'open');
  return open?.url ? html`<p><a href="${open.url}">${open.label}</a></p>` : html``;
};

/**
 * The page a mailed link opens. It decides nothing: mail scanners and link previews fetch links
 * before a person does, so only the form's POST, which a person sends, decides.
 */
export function confirmPage(input: { card: ApprovalCard; action: LinkAction; token: string; approver: string; now: Date }): string {
  const { card, action, token, approver, now } = input;
  const label = card.actions.find((candidate) => candidate.id === action)?.label ?? action;
  const form = html`<form method="post" action="${DECIDE_PATH}" class="decision-form">
    <input type="hidden" name="token" value="${token}" />
    <input type="hidden" name="proposal" value="${card.proposalId}" />
    <input type="hidden" name="action" value="${action}" />
    ${
      action === 'reject'
        ? html`<p><label for="reason">Reason (optional)</label><br /><textarea id="reason" name="reason" rows="3" maxlength="500"></textarea></p>`
        : ''
    }
    <p class="muted">You decide as <strong>${approver}</strong>. This link works once.</p>
    <button type="submit" class="btn ${action === 'approve' ? 'btn-primary' : 'btn-danger'} btn-large">${label}</button>
  </form>`;
  return emailPage(label, cardSection(card, now, form), now);
}

/** A link that opens no form: what the link was for is unknown or spent, so only the reason is shown. */
export function problemPage(problem: LinkProblem, now: Date): string {
  return emailPage('Link not usable', html`<section class="card">${notice('error', LINK_PROBLEMS[problem].text)}</section>`, now);
}

/** The core refused (not pending, an owner, not an approver, a passkey needed): its words, and the proposal as it stands. */
export function refusedPage(card: ApprovalCard, message: string, now: Date): string {
  return emailPage('Not done', html`${notice('error', message)}${cardSection(card, now, consoleLink(card))}`, now);
}

/** After the decision: what it did, in the card's words (the status line says where the proposal stands). */
export function decidedPage(card: ApprovalCard, headline: string, now: Date): string {
  return emailPage(headline, html`${notice('ok', headline)}${cardSection(card, now, consoleLink(card))}`, now);
}
