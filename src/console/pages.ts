import type { ChainVerdict } from '../core/audit-chain.js';
import type { AgentRecord, ApprovalRecord, AuditEventRecord, ProposalRecord, ProposalStatus } from '../core/model.js';
import { html, type HtmlValue, type SafeHtml } from './html.js';
import { countdown, formFields, formatTime, notice, prettyJson, statusBadge, timeTag, type Viewer } from './layout.js';
import type { LinkProblem } from './sign-in.js';

/** Whether the viewer may press Approve / Reject on a proposal, and if not, why (shown to them). */
export type Eligibility = { can: true; approved: boolean } | { can: false; why: string };

export interface ProposalItem {
  proposal: ProposalRecord;
  agentName: string;
  description: string;
  approvals: ApprovalRecord[];
  eligibility: Eligibility;
}

const approvalsText = (item: Pick<ProposalItem, 'approvals' | 'proposal'>): string =>
  `${item.approvals.length} of ${item.proposal.quorum} approval${item.proposal.quorum === 1 ? '' : 's'}`;

function approvalsLine(item: ProposalItem): SafeHtml {
  const names = item.approvals.map((a) => a.approver).join(', ');
  return html`<span class="approvals"><strong>${approvalsText(item)}</strong>${names ? html` <span class="muted">(${names})</span>` : ''}</span>`;
}

/** Approve, Reject with a reason, or the reason the viewer cannot: plain forms, no script needed. */
function decisionControls(item: ProposalItem, viewer: Viewer, returnTo: string): SafeHtml {
  const { proposal, eligibility } = item;
  const id = proposal.id;
  const failed = proposal.status === 'approved' && proposal.error !== null;
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
    ${eligibility.approved
      ? html`<p class="done-note"><span aria-hidden="true">✓</span> You approved; waiting for ${proposal.quorum - item.approvals.length} more.</p>`
      : html`<form method="post" action="/console/proposals/${id}/approve" class="inline">
          ${formFields(viewer, returnTo)}
          <button type="submit" class="btn btn-approve" aria-describedby="summary-${id}">Approve</button>
        </form>`}
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
      ${statusBadge(proposal.status, proposal.error !== null)}
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
    ${items.length === 0
      ? html`<div class="empty" id="pending-empty">
          <p class="empty-title">Nothing is waiting for a decision.</p>
          <p class="muted">New proposals appear here by themselves as soon as an agent makes them.</p>
        </div>`
      : items.map((item) => proposalCard(item, viewer, now, '/console'))}
    ${failed.length > 0
      ? html`<h2 class="section-title">Approved, but the execution failed</h2>
          ${failed.map((item) => proposalCard(item, viewer, now, '/console'))}`
      : ''}
  </div>`;
}

export function pendingPage(items: ProposalItem[], failed: ProposalItem[], viewer: Viewer, now: Date): SafeHtml {
  return html`<div class="page-head">
      <h1>Pending proposals</h1>
      <p class="muted">Agents are asking; nothing runs until enough approvers say yes. This list updates by itself.</p>
    </div>
    ${pendingList(items, failed, viewer, now)}`;
}

const STATUSES: readonly ProposalStatus[] = ['pending', 'approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'];

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
      <td data-label="Status">${statusBadge(proposal.status, proposal.error !== null)}</td>
      <td data-label="Summary" class="cell-summary"><a href="/console/proposals/${proposal.id}">${proposal.summary}</a></td>
      <td data-label="Agent">${agentName}</td>
      <td data-label="Operation"><span class="chip">${proposal.operation}</span></td>
      <td data-label="Approvals">${approvals.length} of ${proposal.quorum}</td>
      <td data-label="Decided by">${decided ?? html`<span class="muted">—</span>`}${proposal.decisionReason
          ? html`<div class="muted small">“${proposal.decisionReason}”</div>`
          : ''}</td>
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
    ${rows.length === 0
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
        ${rows.length >= input.limit ? html`<p class="muted small">Showing the newest ${input.limit}; narrow the filters to see older ones.</p>` : ''}`}`;
}

const EVENT_LABELS: Record<string, string> = {
  'proposal.created': 'Proposed',
  'approval.recorded': 'Approval recorded',
  'proposal.approved': 'Approved (quorum reached)',
  'proposal.rejected': 'Rejected',
  'proposal.cancelled': 'Cancelled by the agent',
  'proposal.expired': 'Expired',
  'execution.started': 'Execution started',
  'execution.failed': 'Execution failed',
  'execution.resumed': 'Execution resumed after a crash',
  'proposal.committed': 'Committed',
};

function eventDetails(data: Record<string, unknown>): SafeHtml {
  const entries = Object.entries(data);
  if (entries.length === 0) return html``;
  return html`<dl class="event-data">
    ${entries.map(
      ([key, value]) =>
        html`<div><dt>${key}</dt><dd>${typeof value === 'string' ? value : html`<code>${JSON.stringify(value)}</code>`}</dd></div>`,
    )}
  </dl>`;
}

function timeline(events: AuditEventRecord[]): SafeHtml {
  return html`<ol class="timeline">
    ${events.map((event) => {
      const tone = event.type.includes('failed') || event.type.includes('rejected') ? 'bad' : event.type.includes('committed') || event.type.includes('approved') ? 'good' : 'plain';
      return html`<li class="tl-item tl-${tone}">
        <div class="tl-head">
          <span class="tl-title">${EVENT_LABELS[event.type] ?? event.type}</span>
          <span class="muted">by <strong>${event.actor}</strong></span>
        </div>
        <div class="tl-meta muted small">${timeTag(event.at)} · <code>${event.type}</code> · event #${event.seq} · hash <code>${event.hash.slice(0, 12)}</code></div>
        ${eventDetails(event.data)}
      </li>`;
    })}
  </ol>`;
}

function chainState(verdict: ChainVerdict): SafeHtml {
  return verdict.ok
    ? html`<p class="chain chain-ok"><span aria-hidden="true">✔</span> <strong>Audit chain intact</strong>: all ${verdict.rows} events verified, each hash linking to the one before.</p>`
    : html`<p class="chain chain-broken" role="alert"><span aria-hidden="true">✕</span> <strong>Audit chain BROKEN</strong> at event #${verdict.seq}: ${verdict.reason}. Run <code>twokey audit verify</code> and investigate.</p>`;
}

export function proposalPage(input: {
  item: ProposalItem;
  events: AuditEventRecord[];
  chain: ChainVerdict;
  viewer: Viewer;
  now: Date;
  commitMode: string;
}): SafeHtml {
  const { item, viewer, now } = input;
  const { proposal } = item;
  const self = `/console/proposals/${proposal.id}`;
  const decision =
    proposal.decidedBy && proposal.decidedAt && proposal.status !== 'pending'
      ? html`<div><dt>Decision</dt><dd>${proposal.decidedBy}, ${timeTag(proposal.decidedAt)}${proposal.decisionReason
            ? html`<div class="reason">Reason: “${proposal.decisionReason}”</div>`
            : ''}</dd></div>`
      : '';
  return html`<nav class="crumbs" aria-label="Breadcrumb"><a href="/console">Pending</a> / <a href="/console/history">History</a> / <span aria-current="page">${proposal.id}</span></nav>
    <article class="card detail" data-id="${proposal.id}">
      <div class="card-head">
        ${statusBadge(proposal.status, proposal.error !== null)}
        <span class="chip">${proposal.operation}</span>
        <span class="chip chip-type">${proposal.confirmationType}</span>
        ${proposal.status === 'pending' ? countdown(proposal.expiresAt, now) : ''}
      </div>
      <h1 class="summary" id="summary-${proposal.id}">${proposal.summary}</h1>
      <dl class="facts">
        <div><dt>Proposal</dt><dd><code>${proposal.id}</code></dd></div>
        <div><dt>Agent</dt><dd>${item.agentName}</dd></div>
        <div><dt>Operation</dt><dd>${item.description}</dd></div>
        <div><dt>Commit</dt><dd>${input.commitMode === 'agent' ? 'by the agent, with its token, after approval' : 'on approval'}</dd></div>
        ${proposal.cost ? html`<div><dt>Cost</dt><dd>${proposal.cost}</dd></div>` : ''}
        <div><dt>Created</dt><dd>${timeTag(proposal.createdAt)}</dd></div>
        <div><dt>Expires</dt><dd>${timeTag(proposal.expiresAt)}</dd></div>
        <div><dt>Approvals</dt><dd>${approvalsLine(item)}</dd></div>
        ${decision}
      </dl>
      ${decisionControls(item, viewer, self)}
    </article>
    ${proposal.status === 'committed'
      ? html`<section class="card result result-ok" aria-labelledby="result-title">
          <h2 id="result-title"><span aria-hidden="true">✔</span> Executor result</h2>
          <pre><code>${prettyJson(proposal.result ?? null)}</code></pre>
        </section>`
      : ''}
    ${proposal.error
      ? html`<section class="card result result-error" aria-labelledby="error-title">
          <h2 id="error-title"><span aria-hidden="true">✕</span> Executor error</h2>
          <pre><code>${proposal.error}</code></pre>
        </section>`
      : ''}
    <section class="card" aria-labelledby="params-title">
      <h2 id="params-title">Params</h2>
      <pre><code>${prettyJson(proposal.params)}</code></pre>
    </section>
    <section class="card" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Audit timeline</h2>
      ${chainState(input.chain)} ${timeline(input.events)}
    </section>`;
}

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
      <td data-label="Status">${revoked
          ? html`<span class="badge status-rejected"><span aria-hidden="true">⊘</span> Revoked</span>`
          : html`<span class="badge status-committed"><span aria-hidden="true">●</span> Active</span>`}</td>
      <td data-label="Owners">${agent.owners.length > 0 ? agent.owners.join(', ') : html`<span class="muted">none</span>`}</td>
      <td data-label="Operations">${agent.operations ? agent.operations.map((o) => html`<span class="chip">${o}</span> `) : html`<span class="muted">all operations</span>`}</td>
      <td data-label="Proposals">${proposals.total}${proposals.pending > 0 ? html` <span class="muted">(${proposals.pending} pending)</span>` : ''}</td>
      <td data-label="Last activity">${lastActivity ? timeTag(lastActivity) : html`<span class="muted">never</span>`}</td>
      <td data-label="Actions">${revoked
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
            : html`<span class="muted small">${revoke.why}</span>`}</td>
    </tr>`;
  });
  return html`<div class="page-head">
      <h1>Agents</h1>
      <p class="muted">Who may propose what. Revoking an agent is an operator action: here you may revoke an agent when you approve every
        operation it may propose and do not own it; otherwise run <code>twokey agents revoke NAME</code>.</p>
    </div>
    ${rows.length === 0
      ? html`<div class="empty"><p class="empty-title">No agents yet.</p><p class="muted">Create one with <code>twokey agents create NAME</code>.</p></div>`
      : html`<div class="table-wrap">
          <table class="table stack-on-phone">
            <caption class="sr-only">Agents</caption>
            <thead>
              <tr><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Owners</th><th scope="col">Operations</th><th scope="col">Proposals</th><th scope="col">Last activity</th><th scope="col">Actions</th></tr>
            </thead>
            <tbody>${rows}</tbody>
          </table>
        </div>`}`;
}

const LINK_PROBLEMS: Record<LinkProblem | 'cross-site', string> = {
  'cross-site': 'This sign-in was sent from another site and was refused. Open the link itself in your browser.',
  malformed: 'This sign-in link is not valid. Check that you copied all of it.',
  unknown: 'This sign-in link is not valid. Check that you copied all of it, or ask for a new one.',
  used: 'This sign-in link was already used. Each link works only once: ask for a new one.',
  expired: 'This sign-in link has expired (links work for 10 minutes). Ask for a new one.',
};

function signInCard(body: HtmlValue): SafeHtml {
  return html`<section class="card signin" aria-labelledby="signin-title">${body}</section>`;
}

const howToGetALink = html`<p>An operator prints a one-time link with:</p>
  <pre><code>twokey approvers link YOUR_NAME</code></pre>
  <p class="muted small">You then act as the approver <code>web:YOUR_NAME</code>. Links work once, for 10 minutes.</p>`;

export function signInPrompt(viewer: Viewer | null): SafeHtml {
  return signInCard(html`<h1 id="signin-title">Sign in to the twokey console</h1>
    ${viewer ? html`<p>You are signed in as <strong>${viewer.approver}</strong>. <a href="/console">Go to the pending proposals</a>.</p>` : ''}
    ${howToGetALink}`);
}

export function signInConfirm(token: string, approver: string, expiresAt: Date): SafeHtml {
  return signInCard(html`<h1 id="signin-title">Sign in to the twokey console</h1>
    <p>This link signs you in as the approver <strong>${approver}</strong>.</p>
    <form method="post" action="/console/login">
      <input type="hidden" name="token" value="${token}" />
      <button type="submit" class="btn btn-primary btn-large">Sign in as ${approver}</button>
    </form>
    <p class="muted small">The link works once and expires at ${formatTime(expiresAt)}. Signing in opens a session of 12 hours on this browser.</p>`);
}

export function signInRefused(problem: LinkProblem | 'cross-site'): SafeHtml {
  return signInCard(html`<h1 id="signin-title">This link cannot sign you in</h1>
    ${notice('error', LINK_PROBLEMS[problem])}
    ${howToGetALink}`);
}

export function signedOutPage(): SafeHtml {
  return signInCard(html`<h1 id="signin-title">You are signed out</h1>
    <p>Your session has ended on this browser.</p>
    ${howToGetALink}`);
}

/** A refused action (HTTP 4xx): what happened, and a way back. */
export function refusedPage(title: string, message: HtmlValue, back: string): SafeHtml {
  return html`<div class="page-head"><h1>${title}</h1></div>
    ${notice('error', message)}
    <p><a class="btn btn-quiet" href="${back}">← Back</a></p>`;
}
