import type { GrantBound } from '../../core/grants.js';
import { isFailedExecution } from '../../core/outcome.js';
import type { ApprovalRecord, ProposalRecord } from '../../core/model.js';
import { html, type SafeHtml } from '../html.js';
import { countdown, formFields, prettyJson, statusBadge, type Viewer } from '../layout.js';
import { approveForForm } from './grants.js';
import { passkeyAnswerFields } from './passkeys.js';

/** Whether the viewer may press Approve / Reject on a proposal, and if not, why (shown to them). */
export type Eligibility = { can: true; approved: boolean } | { can: false; why: string };

export interface ProposalItem {
  proposal: ProposalRecord;
  agentName: string;
  description: string;
  approvals: ApprovalRecord[];
  eligibility: Eligibility;
  /** "Approve for…" durations from the operation's `grants:`; empty when it allows none. */
  grantDurationsMs: readonly number[];
  /** The bounds a bounded grant given on this proposal would set: every declared param. */
  grantBounds: readonly GrantBound[];
  /** The operation says `stepUp: passkey`: Approve runs a passkey assertion made for this proposal. */
  stepUp: boolean;
}

const approvalsText = (item: Pick<ProposalItem, 'approvals' | 'proposal'>): string =>
  `${item.approvals.length} of ${item.proposal.quorum} approval${item.proposal.quorum === 1 ? '' : 's'}`;

export function approvalsLine(item: ProposalItem): SafeHtml {
  const names = item.approvals.map((a) => a.approver).join(', ');
  return html`<span class="approvals"><strong>${approvalsText(item)}</strong>${names ? html` <span class="muted">(${names})</span>` : ''}</span>`;
}

/** Approve, Reject with a reason, or the reason the viewer cannot: plain forms, no script needed. */
export function decisionControls(item: ProposalItem, viewer: Viewer, returnTo: string): SafeHtml {
  const { proposal, eligibility } = item;
  const id = proposal.id;
  const failed = isFailedExecution(proposal);
  // A final proposal has nothing left to decide, for anyone.
  if (proposal.status !== 'pending' && !failed) return html``;
  if (!eligibility.can) return html`<p class="why">${eligibility.why}</p>`;
  if (failed) {
    return html`<div class="actions">
      <form method="post" action="/console/proposals/${id}/retry" class="inline">
        ${formFields(viewer, returnTo)}
        <button type="submit" class="btn btn-primary" aria-describedby="summary-${id}">Retry execution</button>
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
              <button type="submit" class="btn btn-approve" aria-describedby="summary-${id}">Approve</button>
            </form>
        ${item.grantDurationsMs.length > 0 ? approveForForm(proposal, item.grantDurationsMs, item.grantBounds, viewer, returnTo) : ''}`
    }
    <details class="reject-box">
      <summary class="btn btn-reject-outline" aria-describedby="summary-${id}">Reject…</summary>
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
  return html`<article class="card proposal-card" id="card-${id}" data-id="${id}" data-version="${proposal.updatedAt.toISOString()}">
    <div class="card-head">
      ${statusBadge(proposal.status, isFailedExecution(proposal))}
      <span class="chip" title="operation">${proposal.operation}</span>
      <span class="chip chip-type">${proposal.confirmationType}</span>
      ${proposal.status === 'pending' ? countdown(proposal.expiresAt, now) : ''}
    </div>
    <h2 class="summary" id="summary-${id}"><a href="/console/proposals/${id}">${proposal.summary}</a></h2>
    <dl class="facts">
      <div><dt>Agent</dt><dd>${item.agentName}</dd></div>
      <div><dt>Operation</dt><dd>${item.description}</dd></div>
      ${proposal.cost ? html`<div><dt>Cost</dt><dd>${proposal.cost}</dd></div>` : ''}
      <div><dt>Approvals</dt><dd>${approvalsLine(item)}</dd></div>
      ${proposal.error ? html`<div class="fact-wide"><dt>Execution error</dt><dd class="error-text">${proposal.error}</dd></div>` : ''}
    </dl>
    <details class="params">
      <summary>Params</summary>
      <pre><code>${prettyJson(proposal.params)}</code></pre>
    </details>
    ${decisionControls(item, viewer, returnTo)}
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
