import { toneOf } from '../../chat/card.js';
import { PROPOSAL_STATUSES, type ProposalStatus } from '../../core/model.js';
import { html, type SafeHtml } from '../html.js';
import { notice, statusBadge, timeTag } from '../layout.js';
import type { ProposalItem } from './proposal-item.js';

const STATUSES: readonly ProposalStatus[] = PROPOSAL_STATUSES;

export interface HistoryQuery {
  status: string;
  operation: string;
  agent: string;
  approver: string;
  from: string;
  to: string;
}

function option(value: string, label: string, selected: string): SafeHtml {
  return html`<option value="${value}"${value === selected ? html` selected` : ''}>${label}</option>`;
}

export function historyPage(input: {
  query: HistoryQuery;
  operations: string[];
  agents: string[];
  approvers: string[];
  items: ProposalItem[];
  limit: number;
  problem: string | null;
}): SafeHtml {
  const { query } = input;
  const rows = input.items.map(({ proposal, agentName, approvals }) => {
    const decided = proposal.decidedBy && !['pending'].includes(proposal.status) ? proposal.decidedBy : null;
    return html`<tr>
      <td data-label="Created">${timeTag(proposal.createdAt)}</td>
      <td data-label="Status">${statusBadge(toneOf(proposal))}</td>
      <td data-label="Summary" class="cell-summary"><a href="/console/proposals/${proposal.id}">${proposal.summary}</a></td>
      <td data-label="Agent">${agentName}</td>
      <td data-label="Operation"><span class="chip">${proposal.operation}</span></td>
      <td data-label="Approvals">${approvals.length} of ${proposal.quorum}</td>
      <td data-label="Decided by">${decided ?? html`<span class="muted">—</span>`}${
        proposal.decisionReason ? html`<div class="muted small">“${proposal.decisionReason}”</div>` : ''
      }</td>
    </tr>`;
  });
  return html`<div class="page-head">
      <h1>History</h1>
      <p class="muted">Every proposal, newest first. Filter by status, operation, agent, approver or creation date (UTC).</p>
    </div>
    <form method="get" action="/console/history" class="card filters" aria-label="Filter proposals">
      <div class="field">
        <label for="f-status">Status</label>
        <select id="f-status" name="status">
          ${option('', 'Any status', query.status)} ${STATUSES.map((s) => option(s, s, query.status))}
        </select>
      </div>
      <div class="field">
        <label for="f-operation">Operation</label>
        <select id="f-operation" name="operation">
          ${option('', 'Any operation', query.operation)} ${input.operations.map((o) => option(o, o, query.operation))}
        </select>
      </div>
      <div class="field">
        <label for="f-agent">Agent</label>
        <select id="f-agent" name="agent">
          ${option('', 'Any agent', query.agent)} ${input.agents.map((a) => option(a, a, query.agent))}
        </select>
      </div>
      <div class="field">
        <label for="f-approver">Approver</label>
        <input id="f-approver" name="approver" value="${query.approver}" list="known-approvers" placeholder="e.g. web:operator" autocomplete="off" />
        <datalist id="known-approvers">${input.approvers.map((a) => html`<option value="${a}"></option>`)}</datalist>
      </div>
      <div class="field">
        <label for="f-from">Created from</label>
        <input id="f-from" name="from" type="date" value="${query.from}" />
      </div>
      <div class="field">
        <label for="f-to">Created to (inclusive)</label>
        <input id="f-to" name="to" type="date" value="${query.to}" />
      </div>
      <div class="field field-actions">
        <button type="submit" class="btn btn-primary">Apply filters</button>
        <a class="btn btn-quiet" href="/console/history">Clear</a>
      </div>
    </form>
    ${input.problem ? notice('error', input.problem) : ''}
    ${
      rows.length === 0
        ? html`<div class="empty"><p class="empty-title">No proposals match these filters.</p></div>`
        : html`<div class="table-wrap">
          <table class="table stack-on-phone">
            <caption class="sr-only">Proposals</caption>
            <thead>
              <tr><th scope="col">Created</th><th scope="col">Status</th><th scope="col">Summary</th><th scope="col">Agent</th><th scope="col">Operation</th><th scope="col">Approvals</th><th scope="col">Decided by</th></tr>
            </thead>
            <tbody>${rows}</tbody>
          </table>
        </div>
        ${rows.length >= input.limit ? html`<p class="muted small">Showing the newest ${input.limit}; narrow the filters to see older ones.</p>` : ''}`
    }`;
}
