import type { ChainVerdict } from '../../core/audit-chain.js';
import { approvalCard } from '../../chat/card.js';
import type { AuditEventRecord } from '../../core/model.js';
import { html, type SafeHtml } from '../html.js';
import { prettyJson, timeTag, type Viewer } from '../layout.js';
import { cardHead, cardViewOf, factsOf, statusFact } from './card-html.js';
import { decisionControls } from './proposal-card.js';
import type { ProposalItem } from './proposal-item.js';

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
  'policy.required': 'A policy rule asks for approval',
  'policy.error': 'A policy rule failed; people decide',
  'grant.created': 'Grant given (approve for a while)',
  'grant.approved': 'Grant joined by another approver',
  'grant.activated': 'Grant in force',
  'grant.used': 'Covered by a grant',
  'grant.revoked': 'Grant revoked',
};

/** Who decided, and for a rule or a grant what that is: no person clicked. */
function deciderNote(decidedBy: string): SafeHtml | string {
  if (decidedBy.startsWith('policy:')) return html` <span class="muted small">(a policy rule of the config)</span>`;
  if (decidedBy.startsWith('grant:')) return html` <span class="muted small">(a standing approval; see <a href="/console/grants">Grants</a>)</span>`;
  return '';
}

function eventDetails(data: Record<string, unknown>): SafeHtml {
  const entries = Object.entries(data);
  if (entries.length === 0) return html``;
  return html`<dl class="event-data">
    ${entries.map(
      ([key, value]) => html`<div><dt>${key}</dt><dd>${typeof value === 'string' ? value : html`<code>${JSON.stringify(value)}</code>`}</dd></div>`,
    )}
  </dl>`;
}

function timeline(events: AuditEventRecord[]): SafeHtml {
  return html`<ol class="timeline">
    ${events.map((event) => {
      const tone =
        event.type.includes('failed') || event.type.includes('rejected')
          ? 'bad'
          : event.type.includes('committed') || event.type.includes('approved')
            ? 'good'
            : 'plain';
      return html`<li class="tl-item tl-${tone}">
        <div class="tl-head">
          <span class="tl-title">${EVENT_LABELS[event.type] ?? event.type}</span>
          <span class="muted">by <strong>${event.actor}</strong></span>
        </div>
        <div class="tl-meta muted small">${timeTag(event.at)} · <code>${event.type}</code> · ${event.seq === null || event.hash === null ? html`not yet in the chain` : html`event #${event.seq} · hash <code>${event.hash.slice(0, 12)}</code>`}</div>
        ${eventDetails(event.data)}
      </li>`;
    })}
  </ol>`;
}

/**
 * "Intact" only when the chain also matches the newest signed checkpoint: links alone hold against
 * no one who can rewrite the table and recompute every hash.
 */
function chainState(verdict: ChainVerdict): SafeHtml {
  if (!verdict.ok) {
    return html`<p class="chain chain-broken" role="alert"><span aria-hidden="true">✕</span> <strong>Audit chain BROKEN</strong> at event #${verdict.seq}: ${verdict.reason}. Run <code>twokey audit verify --checkpoints</code> and investigate.</p>`;
  }
  if (!verdict.checkpoints) {
    return html`<p class="chain chain-unproven"><span aria-hidden="true">!</span> <strong>Audit chain links verified</strong> (${verdict.rows} events), but no signed checkpoint is there to compare them with yet, so this proves nothing against someone who can rewrite the table.</p>`;
  }
  const signed = verdict.signedAt ? html`, signed ${timeTag(new Date(verdict.signedAt))}` : html``;
  return html`<p class="chain chain-ok"><span aria-hidden="true">✔</span> <strong>Audit chain intact</strong>: all ${verdict.rows} events verified, each hash linking to the one before, and matching the newest signed checkpoint (${verdict.covered ?? 0} events${signed}).</p>`;
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
      ? html`<div><dt>Decision</dt><dd>${proposal.decidedBy}${deciderNote(proposal.decidedBy)}, ${timeTag(proposal.decidedAt)}${
          proposal.decisionReason ? html`<div class="reason">Reason: “${proposal.decisionReason}”</div>` : ''
        }</dd></div>`
      : '';
  const card = approvalCard(cardViewOf(item), { compact: false });
  return html`<nav class="crumbs" aria-label="Breadcrumb"><a href="/console">Pending</a> / <a href="/console/history">History</a> / <span aria-current="page">${proposal.id}</span></nav>
    <article class="card detail" data-id="${proposal.id}">
      ${cardHead(card, now)}
      <h1 class="summary" id="summary-${proposal.id}">${card.summary}</h1>
      <dl class="facts">
        ${factsOf(card, ['agent', 'cost', 'expiry', 'approvals', 'proposal'])}
        <div><dt>Commit</dt><dd>${input.commitMode === 'agent' ? 'by the agent, with its token, after approval' : 'on approval'}</dd></div>
        <div><dt>Created</dt><dd>${timeTag(proposal.createdAt)}</dd></div>
        ${decision} ${statusFact(card)}
      </dl>
      ${decisionControls(item, card, viewer, self)}
    </article>
    ${
      proposal.status === 'committed'
        ? html`<section class="card result result-ok" aria-labelledby="result-title">
          <h2 id="result-title"><span aria-hidden="true">✔</span> Executor result</h2>
          <pre><code>${prettyJson(proposal.result ?? null)}</code></pre>
        </section>`
        : ''
    }
    ${
      proposal.error
        ? html`<section class="card result result-error" aria-labelledby="error-title">
          <h2 id="error-title"><span aria-hidden="true">✕</span> Executor error</h2>
          <pre><code>${proposal.error}</code></pre>
        </section>`
        : ''
    }
    <section class="card" aria-labelledby="params-title">
      <h2 id="params-title">Params</h2>
      <pre><code>${prettyJson(proposal.params)}</code></pre>
    </section>
    <section class="card" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Audit timeline</h2>
      ${chainState(input.chain)} ${timeline(input.events)}
    </section>`;
}
