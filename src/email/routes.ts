import formbody from '@fastify/formbody';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { approvalCard } from '../chat/card.js';
import { SECURITY_HEADERS } from '../console/security.js';
import { isTwokeyError } from '../core/errors.js';
import type { Decider, ProposalRecord } from '../core/model.js';
import { checkStepUp, proposalBindingHash, requiresPasskey } from '../core/step-up.js';
import { DECIDE_PATH, LINK_ACTIONS, LINK_TOKEN, linkTokenHash, type LinkAction } from './links.js';
import { confirmPage, decidedPage, LINK_PROBLEMS, problemPage, refusedPage, type LinkProblem } from './pages.js';
import type { EmailLinkRow, EmailServices, EmailStore } from './ports.js';
import { emailView } from './view.js';

export interface EmailRouteDeps {
  services: EmailServices;
  store: EmailStore;
  publicUrl: string;
  logger: () => FastifyBaseLogger;
}

const isAction = (value: unknown): value is LinkAction => typeof value === 'string' && (LINK_ACTIONS as readonly string[]).includes(value);

/** One form value: a repeated field (an array) counts as missing. */
function field(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

/** The words of the refusal `check` throws, or null when it passes. */
function catchRefusal(check: () => void): string | null {
  try {
    check();
    return null;
  } catch (error) {
    if (isTwokeyError(error)) return error.message;
    throw error;
  }
}

/** Refusals the core words for a decider (src/core/decision-preview.ts), with the status each answers. */
function refusalStatus(code: string): number {
  return code === 'not_pending' || code === 'expired' || code === 'already_counted' ? 409 : code === 'not_found' ? 404 : 403;
}

/**
 * `GET /email/:action/:proposal/:token` shows a confirm page and decides nothing; `POST /email/decide`
 * (the page's form) decides through the core as the link's approver, with the same rules as a click
 * in chat or the console. The token is the form's only credential: a person who can read the mail
 * can decide, as the mail's recipient, once.
 */
export async function registerEmailRoutes(app: FastifyInstance, deps: EmailRouteDeps): Promise<void> {
  const { services, store } = deps;
  const publicOrigin = new URL(deps.publicUrl).origin;
  const decider = (link: EmailLinkRow): Decider => ({ identity: link.approver, via: 'email' });

  async function cardOf(proposal: ProposalRecord) {
    const [agent, approvals] = await Promise.all([services.store.getAgent(proposal.agentId), services.store.listApprovals(proposal.id)]);
    const description = services.operation(proposal.operation)?.description ?? '';
    return approvalCard(emailView({ proposal, agent, approvals, description, publicUrl: deps.publicUrl }), { compact: false });
  }

  const sendHtml = (reply: FastifyReply, status: number, body: string) => reply.code(status).type('text/html; charset=utf-8').send(body);
  const sendProblem = (reply: FastifyReply, problem: LinkProblem) => sendHtml(reply, LINK_PROBLEMS[problem].status, problemPage(problem, services.clock()));

  /** The link behind a token, or why it opens nothing; whether it is spent is the caller's question. */
  async function linkFor(token: string | undefined, proposalId: string | undefined): Promise<EmailLinkRow | LinkProblem> {
    if (!token || !LINK_TOKEN.test(token) || !proposalId) return 'malformed';
    const link = await store.findLink(linkTokenHash(token));
    if (!link) return 'unknown';
    if (link.proposalId !== proposalId) return 'other_proposal';
    return link;
  }

  /** A link whose proposal still is what it was bound to; null when it changed or went. */
  async function boundProposal(link: EmailLinkRow): Promise<ProposalRecord | null> {
    const proposal = await services.store.getProposal(link.proposalId);
    return proposal && proposalBindingHash(proposal) === link.bindingHash ? proposal : null;
  }

  /** A form from another site is refused (the browser's Sec-Fetch-Site, else its Origin). */
  function crossSite(request: FastifyRequest): boolean {
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined) return site !== 'same-origin';
    const origin = request.headers.origin;
    // A page under Referrer-Policy no-referrer posts with `Origin: null`; the token in the form still guards it.
    if (origin === undefined || origin === 'null') return false;
    const host = request.headers.host;
    return ![publicOrigin, host ? `http://${host}` : null, host ? `https://${host}` : null].includes(origin);
  }

  await app.register(async (scope) => {
    if (!scope.hasContentTypeParser('application/x-www-form-urlencoded')) await scope.register(formbody, { bodyLimit: 16 * 1024 });
    scope.addHook('onSend', async (_request, reply, payload) => {
      // The page's address holds the token: no Referer may carry it away, no cache may keep it.
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
      reply.header('cache-control', 'no-store');
      return payload;
    });

    scope.get<{ Params: { action: string; proposalId: string; token: string } }>('/email/:action/:proposalId/:token', async (request, reply) => {
      const { action, proposalId, token } = request.params;
      if (!isAction(action)) return sendProblem(reply, 'malformed');
      const now = services.clock();
      const link = await linkFor(token, proposalId);
      if (typeof link === 'string') return sendProblem(reply, link);
      if (link.usedAt) return sendProblem(reply, 'used');
      if (now.getTime() >= link.expiresAt.getTime()) return sendProblem(reply, 'expired');
      const proposal = await boundProposal(link);
      if (!proposal) return sendProblem(reply, 'changed');
      const card = await cardOf(proposal);
      const operation = services.operation(proposal.operation);
      if (action === 'approve' && operation && requiresPasskey(operation, proposal)) {
        // The core's own refusal, with the console's page of the proposal: a passkey cannot be used from a mail.
        const stepUp = catchRefusal(() =>
          checkStepUp(operation, proposal, decider(link), (id) => new URL(`/console/proposals/${id}`, deps.publicUrl).toString()),
        );
        if (stepUp) return sendHtml(reply, 403, refusedPage(card, stepUp, now));
      }
      const preview = await services.proposals.preview(proposal.id, action, decider(link));
      if (!preview.allowed) return sendHtml(reply, refusalStatus(preview.code), refusedPage(card, preview.message, now));
      return sendHtml(reply, 200, confirmPage({ card, action, token, approver: link.approver, now }));
    });

    scope.post(DECIDE_PATH, async (request, reply) => {
      if (crossSite(request)) return sendProblem(reply, 'cross_site');
      const token = field(request.body, 'token');
      const action = field(request.body, 'action');
      const proposalId = field(request.body, 'proposal');
      if (!token || !proposalId || !isAction(action)) return sendProblem(reply, 'bad_form');
      const found = await linkFor(token, proposalId);
      if (typeof found === 'string') return sendProblem(reply, found);
      const tokenHash = linkTokenHash(token);
      const link = await store.claimLink(tokenHash, services.clock());
      // Spent (perhaps a moment ago, by a second press) or expired: either way nothing is decided.
      if (!link) return sendProblem(reply, !found.usedAt && services.clock() >= found.expiresAt ? 'expired' : 'used');
      const proposal = await boundProposal(link);
      if (!proposal) return sendProblem(reply, 'changed');
      try {
        const decided =
          action === 'approve'
            ? await services.proposals.approve(proposal.id, decider(link))
            : await services.proposals.reject(proposal.id, decider(link), field(request.body, 'reason') ?? null);
        deps.logger().info({ proposalId: proposal.id, approver: link.approver, action, outcome: decided.outcome }, 'email link decided');
        const headline =
          decided.outcome === 'rejected'
            ? 'You rejected this proposal.'
            : decided.outcome === 'counted'
              ? 'Your approval is counted.'
              : decided.outcome === 'already_counted'
                ? 'Your approval was already counted.'
                : 'You approved this proposal.';
        return sendHtml(reply, 200, decidedPage(await cardOf(decided.proposal), headline, services.clock()));
      } catch (error) {
        // Nothing was decided for a reason that may pass (or that the console can answer): the link stays usable.
        if (!isTwokeyError(error) || error.code === 'step_up_required') await store.releaseLink(tokenHash);
        if (!isTwokeyError(error)) throw error;
        deps.logger().info({ proposalId: proposal.id, approver: link.approver, action, code: error.code }, 'email link refused');
        const current = (await services.store.getProposal(proposal.id)) ?? proposal;
        return sendHtml(reply, refusalStatus(error.code), refusedPage(await cardOf(current), error.message, services.clock()));
      }
    });
  });
}
