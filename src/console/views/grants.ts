import { describeBound, type GrantBound, type GrantState, type GrantWithApprovals } from '../../core/grants.js';
import type { ProposalRecord } from '../../core/model.js';
import { MAX_GRANT_USES } from '../grant-form.js';
import { html, type SafeHtml } from '../html.js';
import { formFields, formatDuration, timeTag, type Viewer } from '../layout.js';

/**
 * "Approve for…" beside Approve: the choices Slack's modal offers (a duration from the operation's
 * config, at most some uses, bounds taken from this proposal), as one plain form. The bounds are
 * listed in full, "absent" ones included: what the approver ticks is every condition the grant sets.
 */
export function approveForForm(
  proposal: ProposalRecord,
  durationsMs: readonly number[],
  bounds: readonly GrantBound[],
  viewer: Viewer,
  returnTo: string,
): SafeHtml {
  const id = proposal.id;
  return html`<details class="reject-box grant-box">
    <summary class="btn btn-approve-outline" aria-describedby="summary-${id}">Approve for…</summary>
    <form method="post" action="/console/proposals/${id}/approve-for" class="reject-form">
      ${formFields(viewer, returnTo)}
      <label for="duration-${id}">Approve this, and the same operation of this agent, for</label>
      <select id="duration-${id}" name="duration">
        ${durationsMs.map((ms) => html`<option value="${String(ms)}">${formatDuration(ms)}</option>`)}
      </select>
      <label for="uses-${id}">At most this many proposals <span class="muted">(empty: no limit)</span></label>
      <input id="uses-${id}" name="uses" type="number" min="1" max="${String(MAX_GRANT_USES)}" step="1" inputmode="numeric" />
      ${
        bounds.length > 0
          ? html`<label class="check"><input type="checkbox" name="bounded" value="yes" />
            <span>Only amounts up to this proposal’s, every other param as in it (a param it lacks stays absent):
              <span class="muted small">${bounds.map((bound, i) => html`${i > 0 ? ', ' : ''}<code>${describeBound(bound)}</code>`)}</span></span></label>`
          : ''
      }
      <p class="muted small">Matching proposals of this agent are approved without asking until the grant expires or is revoked (Grants page).</p>
      <button type="submit" class="btn btn-approve">Approve and grant</button>
    </form>
  </details>`;
}

export interface GrantItem {
  entry: GrantWithApprovals;
  agentName: string;
  state: GrantState;
  revoke: { can: true } | { can: false; why: string };
}

const STATE_LABELS: Record<GrantState, string> = {
  waiting: 'Waiting for a second approver',
  active: 'Active',
  used_up: 'Used up',
  expired: 'Expired',
  revoked: 'Revoked',
};

export function grantsPage(items: GrantItem[], viewer: Viewer): SafeHtml {
  const rows = items.map(
    ({ entry: { grant, approvals }, agentName, state, revoke }) => html`<tr id="grant-${grant.id}">
      <td data-label="Grant"><code>${grant.id}</code>${
        grant.sourceProposalId
          ? html`<div class="muted small">given on <a href="/console/proposals/${grant.sourceProposalId}">${grant.sourceProposalId}</a></div>`
          : ''
      }</td>
      <td data-label="Granted by">${approvals.map((a) => a.approver).join(', ')}${grant.quorum > 1 ? html` <span class="muted small">(${approvals.length} of ${grant.quorum})</span>` : ''}</td>
      <td data-label="Operation"><span class="chip">${grant.operation}</span></td>
      <td data-label="Agent">${agentName}</td>
      <td data-label="Bounds">${grant.bounds.length > 0 ? grant.bounds.map((b, i) => html`${i > 0 ? html`<br />` : ''}<code>${describeBound(b)}</code>`) : html`<span class="muted">none</span>`}</td>
      <td data-label="Uses left">${grant.maxUses === null ? html`no limit <span class="muted small">(${grant.uses} used)</span>` : html`${grant.maxUses - grant.uses} of ${grant.maxUses}`}</td>
      <td data-label="Expires">${timeTag(grant.expiresAt)}<div class="muted small">${STATE_LABELS[state]} · ${formatDuration(grant.durationMs)}</div></td>
      <td data-label="Actions">${
        revoke.can
          ? html`<form method="post" action="/console/grants/${grant.id}/revoke" class="inline">
              ${formFields(viewer, '/console/grants')}
              <button type="submit" class="btn btn-reject-outline btn-small">Revoke</button>
            </form>`
          : html`<span class="muted small">${revoke.why}</span>`
      }</td>
    </tr>`,
  );
  return html`<div class="page-head">
      <h1>Grants</h1>
      <p class="muted">Standing approvals (“Approve for…” in the console, Slack or <code>twokey proposals approve --grant</code>): each covers
        the same operation of one agent, within its bounds, until it expires, is used up or is revoked. Approvers of the operation may
        revoke; the proposal it would have covered then waits for people again.</p>
    </div>
    ${
      rows.length === 0
        ? html`<div class="empty"><p class="empty-title">No grant is in force.</p></div>`
        : html`<div class="table-wrap">
          <table class="table stack-on-phone">
            <caption class="sr-only">Grants in force</caption>
            <thead>
              <tr><th scope="col">Grant</th><th scope="col">Granted by</th><th scope="col">Operation</th><th scope="col">Agent</th><th scope="col">Bounds</th><th scope="col">Uses left</th><th scope="col">Expires</th><th scope="col">Actions</th></tr>
            </thead>
            <tbody>${rows}</tbody>
          </table>
        </div>`
    }`;
}
