import type { AgentRecord } from '../../core/model.js';
import { html, type SafeHtml } from '../html.js';
import { formFields, timeTag, type Viewer } from '../layout.js';

export interface AgentItem {
  agent: AgentRecord;
  lastActivity: Date | null;
  proposals: { total: number; pending: number };
  revoke: { can: true } | { can: false; why: string };
}

export function agentsPage(items: AgentItem[], viewer: Viewer): SafeHtml {
  const rows = items.map(({ agent, lastActivity, proposals, revoke }) => {
    const revoked = agent.revokedAt !== null;
    return html`<tr>
      <td data-label="Agent"><strong>${agent.name}</strong><div class="muted small"><code>${agent.keyPrefix}</code></div></td>
      <td data-label="Status">${
        revoked
          ? html`<span class="badge status-rejected"><span aria-hidden="true">⊘</span> Revoked</span>`
          : html`<span class="badge status-committed"><span aria-hidden="true">●</span> Active</span>`
      }</td>
      <td data-label="Owners">${agent.owners.length > 0 ? agent.owners.join(', ') : html`<span class="muted">none</span>`}</td>
      <td data-label="Operations">${agent.operations ? agent.operations.map((o) => html`<span class="chip">${o}</span> `) : html`<span class="muted">all operations</span>`}</td>
      <td data-label="Proposals">${proposals.total}${proposals.pending > 0 ? html` <span class="muted">(${proposals.pending} pending)</span>` : ''}</td>
      <td data-label="Last activity">${lastActivity ? timeTag(lastActivity) : html`<span class="muted">never</span>`}</td>
      <td data-label="Actions">${
        revoked
          ? html`<span class="muted">revoked ${timeTag(agent.revokedAt ?? new Date(0))}</span>`
          : revoke.can
            ? html`<details class="reject-box">
                <summary class="btn btn-reject-outline btn-small">Revoke…</summary>
                <form method="post" action="/console/agents/${agent.name}/revoke" class="reject-form">
                  ${formFields(viewer, '/console/agents')}
                  <p class="small">The API key of <strong>${agent.name}</strong> stops working at once. This cannot be undone; a new agent needs a new key.</p>
                  <button type="submit" class="btn btn-reject">Revoke ${agent.name}</button>
                </form>
              </details>`
            : html`<span class="muted small">${revoke.why}</span>`
      }</td>
    </tr>`;
  });
  return html`<div class="page-head">
      <h1>Agents</h1>
      <p class="muted">Who may propose what. Revoking an agent is an operator action: here you may revoke an agent when you approve every
        operation it may propose and do not own it; otherwise run <code>twokey agents revoke NAME</code>.</p>
    </div>
    ${
      rows.length === 0
        ? html`<div class="empty"><p class="empty-title">No agents yet.</p><p class="muted">Create one with <code>twokey agents create NAME</code>.</p></div>`
        : html`<div class="table-wrap">
          <table class="table stack-on-phone">
            <caption class="sr-only">Agents</caption>
            <thead>
              <tr><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Owners</th><th scope="col">Operations</th><th scope="col">Proposals</th><th scope="col">Last activity</th><th scope="col">Actions</th></tr>
            </thead>
            <tbody>${rows}</tbody>
          </table>
        </div>`
    }`;
}
