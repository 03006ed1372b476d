import { approvalCard, type ApprovalCard } from '../../chat/card.js';
import { html, type SafeHtml } from '../html.js';
import { formFields, prettyJson, type Viewer } from '../layout.js';
import { actionLabel, cardToHtml, cardViewOf } from './card-html.js';
import { approveForForm } from './grants.js';
import type { ProposalItem } from './proposal-item.js';
import { passkeyAnswerFields } from './passkeys.js';

/** Approve, Reject with a reason, or the reason the viewer cannot: plain forms, no script needed. */
export function decisionControls(item: ProposalItem, card: ApprovalCard, viewer: Viewer, returnTo: string): SafeHtml {
  const { proposal, eligibility } = item;
  const id = proposal.id;
  // A final proposal has nothing left to decide, for anyone: the card offers no decision.
  if (!card.actions.some((action) => action.id === 'approve' || action.id === 'retry')) return html``;
  if (!eligibility.can) return html`<p class="why">${eligibility.why}</p>`;
  if (card.tone === 'failed') {
    return html`<div class="actions">
      <form method="post" action="/console/proposals/${id}/retry" class="inline">
        ${formFields(viewer, returnTo)}
        <button type="submit" class="btn btn-primary" aria-describedby="summary-${id}">${actionLabel(card, 'retry')}</button>
      </form>
    </div>`;
  }
  return html`<div class="actions">
    ${
      eligibility.approved
        ? html`<p class="done-note"><span aria-hidden="true">✓</span> You approved; waiting for ${proposal.quorum - item.approvals.length} more.</p>`
        : item.stepUp
          ? html`<form method="post" action="/console/proposals/${id}/approve" class="inline" data-passkey="approve" data-options="/console/proposals/${id}/passkey-options">
              ${formFields(viewer, returnTo)} ${passkeyAnswerFields}
              <button type="submit" class="btn btn-approve" aria-describedby="summary-${id}">Approve with passkey</button>
            </form>`
          : html`<form method="post" action="/console/proposals/${id}/approve" class="inline">
              ${formFields(viewer, returnTo)}
              <button type="submit" class="btn btn-approve" aria-describedby="summary-${id}">${actionLabel(card, 'approve')}</button>
            </form>
        ${item.grantDurationsMs.length > 0 ? approveForForm(proposal, item.grantDurationsMs, item.grantBounds, viewer, returnTo) : ''}`
    }
    <details class="reject-box">
      <!-- The ellipsis marks a disclosure: the form opens in place, as the chat buttons open theirs. -->
      <summary class="btn btn-reject-outline" aria-describedby="summary-${id}">${actionLabel(card, 'reject')}…</summary>
      <form method="post" action="/console/proposals/${id}/reject" class="reject-form">
        ${formFields(viewer, returnTo)}
        <label for="reason-${id}">Reason <span class="muted">(optional; the agent sees it)</span></label>
        <textarea id="reason-${id}" name="reason" rows="2" maxlength="500"></textarea>
        <button type="submit" class="btn btn-reject">Reject proposal</button>
      </form>
    </details>
  </div>`;
}

export function proposalCard(item: ProposalItem, viewer: Viewer, now: Date, returnTo: string): SafeHtml {
  const { proposal } = item;
  const id = proposal.id;
  const card = approvalCard(cardViewOf(item), { compact: false });
  return html`<article class="card proposal-card" id="card-${id}" data-id="${id}" data-version="${proposal.updatedAt.toISOString()}">
    ${cardToHtml(card, now)}
    <details class="params">
      <summary>Params</summary>
      <pre><code>${prettyJson(proposal.params)}</code></pre>
    </details>
    ${decisionControls(item, card, viewer, returnTo)}
  </article>`;
}

export function pendingList(items: ProposalItem[], failed: ProposalItem[], viewer: Viewer, now: Date): SafeHtml {
  return html`<div id="pending-list" data-count="${items.length}">
    ${
      items.length === 0
        ? html`<div class="empty" id="pending-empty">
          <p class="empty-title">Nothing is waiting for a decision.</p>
          <p class="muted">New proposals appear here by themselves as soon as an agent makes them.</p>
        </div>`
        : items.map((item) => proposalCard(item, viewer, now, '/console'))
    }
    ${
      failed.length > 0
        ? html`<h2 class="section-title">Approved, but the execution failed</h2>
          ${failed.map((item) => proposalCard(item, viewer, now, '/console'))}`
        : ''
    }
  </div>`;
}

export function pendingPage(items: ProposalItem[], failed: ProposalItem[], viewer: Viewer, now: Date): SafeHtml {
  return html`<div class="page-head">
      <h1>Pending proposals</h1>
      <p class="muted">Agents are asking; nothing runs until enough approvers say yes. This list updates by itself.</p>
    </div>
    ${pendingList(items, failed, viewer, now)}`;
}
