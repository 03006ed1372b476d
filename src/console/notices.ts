import type { FastifyRequest } from 'fastify';
import { isFailedExecution } from '../core/outcome.js';
import { html, type SafeHtml } from './html.js';
import { notice, statusLabel } from './layout.js';
import type { ConsoleServices } from './ports.js';
import { queryField } from './respond.js';

/** The one-line outcome shown after a form redirected back (`?done=…`). */
export async function doneNotice(services: ConsoleServices, request: FastifyRequest): Promise<SafeHtml | null> {
  const done = queryField(request, 'done');
  if (!done) return null;
  if (done === 'signed-in') return notice('ok', 'You are signed in.');
  if (done === 'revoked') return notice('ok', html`Agent <strong>${queryField(request, 'agent')}</strong> is revoked: its API key no longer works.`);
  if (done === 'passkey-registered') return notice('ok', 'Your passkey is registered: approvals that need a passkey can use it now.');
  if (done === 'passkey-revoked') return notice('ok', 'The passkey is revoked: it approves nothing any more.');
  if (done === 'grant-revoked') return notice('ok', html`Grant <code>${queryField(request, 'grant')}</code> is revoked: it covers no further proposal.`);
  const proposal = await services.store.getProposal(queryField(request, 'id'));
  if (!proposal) return null;
  const link = html`<a href="/console/proposals/${proposal.id}">${proposal.id}</a>`;
  const state = html`It is now <strong>${statusLabel(proposal.status).toLowerCase()}</strong>`;
  switch (done) {
    case 'approve':
      if (proposal.status === 'committed') return notice('ok', html`You approved ${link}. ${state}: see the executor’s result on its page.`);
      if (isFailedExecution(proposal)) return notice('error', html`You approved ${link}, but the execution failed: ${proposal.error ?? ''}`);
      return notice('ok', html`You approved ${link}. ${state}.`);
    case 'grant': {
      const grant = queryField(request, 'grant');
      const granted = html`and granted the same for a while (grant <a href="/console/grants"><code>${grant}</code></a>)`;
      if (isFailedExecution(proposal)) return notice('error', html`You approved ${link} ${granted}, but the execution failed: ${proposal.error ?? ''}`);
      return notice('ok', html`You approved ${link} ${granted}. ${state}.`);
    }
    case 'already':
      return notice('info', html`You had already approved ${link}; it counts once. ${state}.`);
    case 'reject':
      return notice('ok', html`You rejected ${link}. The agent sees your reason.`);
    case 'retry':
      return isFailedExecution(proposal)
        ? notice('error', html`The retry of ${link} failed again: ${proposal.error ?? ''}`)
        : notice('ok', html`The retry of ${link} ran. ${state}.`);
    default:
      return null;
  }
}
