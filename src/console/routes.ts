import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TwokeyError, isTwokeyError, type ErrorCode } from '../core/errors.js';
import { deciderRefusal } from '../core/proposals.js';
import type { AgentRecord, ApprovalRecord, ProposalRecord, ProposalStatus } from '../core/model.js';
import type { Services } from '../runtime/services.js';
import { html, type HtmlValue, type SafeHtml } from './html.js';
import { notice, page, statusLabel, type Section, type Viewer } from './layout.js';
import {
  agentsPage,
  historyPage,
  pendingList,
  pendingPage,
  proposalPage,
  refusedPage,
  signedOutPage,
  signInConfirm,
  signInPrompt,
  signInRefused,
  type AgentItem,
  type Eligibility,
  type HistoryQuery,
  type ProposalItem,
} from './pages.js';
import type { ConsoleQueries } from './queries.js';
import { SESSION_TTL_MS, csrfTokenMatches, type ConsoleAuth, type ConsoleSession } from './sign-in.js';

export interface ConsoleRouteDeps {
  services: Services;
  auth: ConsoleAuth;
  queries: ConsoleQueries;
  /** Cookies get `Secure` when people reach twokey over https (TWOKEY_PUBLIC_URL). */
  secureCookies: boolean;
  /** The origin people use (TWOKEY_PUBLIC_URL), accepted as a form's Origin besides the Host header's. */
  publicOrigin: string | null;
}

/**
 * No inline script or style at all (everything comes from /console/assets), no framing, forms post
 * only here. The login URL carries a token, so no page ever sends a Referer.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
};

const PENDING_LIMIT = 200;
const HISTORY_LIMIT = 200;
const STATUSES: readonly ProposalStatus[] = ['pending', 'approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'];
const SSE_HEARTBEAT_MS = 25_000;

function loadAsset(name: string, type: string) {
  const body = readFileSync(new URL(`./assets/${name}`, import.meta.url));
  return { body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) };
}

const ASSETS = {
  'console.css': loadAsset('console.css', 'text/css; charset=utf-8'),
  'console.js': loadAsset('console.js', 'text/javascript; charset=utf-8'),
} as const;

/** A form value: one string, never an array (a repeated field is refused as missing). */
function field(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

function queryField(request: FastifyRequest, name: string): string {
  const value = (request.query as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value.trim() : '';
}

/** Only paths inside the console, so a forged `return` cannot turn twokey into an open redirect. */
function safeReturn(value: string | undefined): string {
  if (value && /^\/console(?:[/?][^\s\\]*)?$/.test(value) && !value.includes('//')) return value;
  return '/console';
}

function withParams(path: string, params: Record<string, string>): string {
  const url = new URL(path, 'http://console.invalid');
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.pathname + url.search;
}

const REFUSAL_TITLES: Partial<Record<ErrorCode, string>> = {
  not_an_approver: 'You cannot decide on this proposal',
  owner_cannot_approve: 'You cannot decide on this proposal',
  not_pending: 'This proposal is no longer pending',
  expired: 'This proposal has expired',
  not_found: 'Not found',
  operation_removed: 'This operation is no longer configured',
  execution_failed: 'The execution failed',
};

function explain(error: TwokeyError): string {
  switch (error.code) {
    case 'not_an_approver':
      return `You are not an approver of this operation, so your decision cannot count. (${error.message})`;
    case 'owner_cannot_approve':
      return `You own the agent that made this proposal; no one may approve their own agent's proposals. (${error.message})`;
    case 'not_pending':
      return `Someone or something decided first: ${error.message}.`;
    case 'expired':
      return `The proposal expired before your decision arrived. The agent has to propose again. (${error.message})`;
    default:
      return error.message;
  }
}

export async function registerConsoleRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): Promise<void> {
  const { services, auth, queries } = deps;
  const cookieName = deps.secureCookies ? '__Secure-twokey_session' : 'twokey_session';
  /** Event streams end when the server closes, or fastify would wait on them forever. */
  const streams = new Set<() => void>();

  await app.register(
    async (scope) => {
      // The gateway may one day parse cookies or forms itself; registering either twice would throw.
      if (!scope.hasRequestDecorator('cookies')) await scope.register(cookie);
      if (!scope.hasContentTypeParser('application/x-www-form-urlencoded')) await scope.register(formbody, { bodyLimit: 16 * 1024 });

      scope.addHook('onSend', async (request, reply, payload) => {
        for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
        if (!request.url.startsWith('/console/assets/')) reply.header('cache-control', 'no-store');
        return payload;
      });

      scope.addHook('preClose', async () => {
        for (const end of [...streams]) end();
      });

      scope.setErrorHandler((error: FastifyError | TwokeyError, request, reply) => {
        const status = isTwokeyError(error) ? error.status : (error.statusCode ?? 500);
        if (status >= 500) request.log.error({ err: error }, 'console request failed');
        const message = status >= 500 ? 'Something went wrong on the server; the log has the details for this request.' : error.message;
        return sendPage(request, reply, status, { title: 'Not done', viewer: null, section: 'none', body: refusedPage('Not done', message, '/console') });
      });

      scope.setNotFoundHandler((request, reply) =>
        sendPage(request, reply, 404, { title: 'Not found', viewer: null, section: 'none', body: refusedPage('Not found', 'There is no such page in the console.', '/console') }),
      );

      function sendPage(
        _request: FastifyRequest,
        reply: FastifyReply,
        status: number,
        options: { title: string; viewer: Viewer | null; section: Section; body: HtmlValue; live?: { kind: 'pending' } | { kind: 'proposal'; id: string }; pendingCount?: number; notice?: SafeHtml | null },
      ) {
        const markup = page({ ...options, now: services.clock() });
        return reply.code(status).type('text/html; charset=utf-8').send(markup.value);
      }

      async function sessionOf(request: FastifyRequest): Promise<ConsoleSession | null> {
        return auth.authenticate(request.cookies[cookieName]);
      }

      const viewerOf = (session: ConsoleSession): Viewer => ({ approver: session.approver, csrfToken: session.csrfToken });

      /** Pages need a session; without one the person goes to the sign-in page. */
      async function pageSession(request: FastifyRequest, reply: FastifyReply): Promise<ConsoleSession | null> {
        const session = await sessionOf(request);
        if (!session) {
          await reply.redirect('/console/login', 303);
          return null;
        }
        return session;
      }

      /**
       * A form post from another site is refused before anything runs. SameSite=Strict already keeps
       * the cookie off cross-site requests; the Origin check and the CSRF token each hold on their own.
       */
      function crossSite(request: FastifyRequest): boolean {
        // Browsers set Sec-Fetch-Site themselves and no page script can change it.
        const site = request.headers['sec-fetch-site'];
        if (site !== undefined) return site !== 'same-origin';
        const origin = request.headers.origin;
        // Pages under Referrer-Policy no-referrer post with `Origin: null`; the CSRF token still guards them.
        if (origin === undefined || origin === 'null') return false;
        const host = request.headers.host;
        const allowed = new Set([deps.publicOrigin, host ? `http://${host}` : null, host ? `https://${host}` : null]);
        return !allowed.has(origin);
      }

      async function formSession(request: FastifyRequest, reply: FastifyReply): Promise<ConsoleSession | null> {
        const session = await sessionOf(request);
        if (!session) {
          await sendPage(request, reply, 401, {
            title: 'Signed out',
            viewer: null,
            section: 'none',
            body: refusedPage('Your session has ended', 'Sign in again with a new link; nothing was changed.', '/console/login'),
          });
          return null;
        }
        if (crossSite(request) || !csrfTokenMatches(session, field(request.body, '_csrf'))) {
          request.log.warn({ approver: session.approver, url: request.url }, 'console form refused: missing or wrong CSRF token');
          await sendPage(request, reply, 403, {
            title: 'Form refused',
            viewer: viewerOf(session),
            section: 'none',
            body: refusedPage(
              'This form could not be verified',
              'The form did not carry this session’s security token, or came from another site. Nothing was changed. Reload the page and try again.',
              '/console',
            ),
          });
          return null;
        }
        return session;
      }

      function eligibility(approver: string, proposal: ProposalRecord, agent: AgentRecord | undefined, approvals: ApprovalRecord[]): Eligibility {
        const operation = services.operation(proposal.operation);
        if (!operation) return { can: false, why: `The operation ${proposal.operation} is no longer configured, so no one can decide on it.` };
        const refusal = deciderRefusal(operation, agent ?? { name: proposal.agentId, owners: [] }, { identity: approver, via: 'web' });
        if (refusal?.code === 'owner_cannot_approve') {
          return { can: false, why: `You own the agent ${agent?.name ?? proposal.agentId}, so you cannot decide on its proposals.` };
        }
        if (refusal) return { can: false, why: `You (${approver}) are not an approver of ${operation.name}; you can look but not decide.` };
        return { can: true, approved: approvals.some((a) => a.approver === approver) };
      }

      async function itemsFor(proposals: ProposalRecord[], approver: string): Promise<ProposalItem[]> {
        const agents = new Map((await services.agents.list()).map((agent) => [agent.id, agent]));
        const approvals = await queries.approvalsOf(proposals.map((p) => p.id));
        return proposals.map((proposal) => {
          const agent = agents.get(proposal.agentId);
          const list = approvals.get(proposal.id) ?? [];
          const operation = services.operation(proposal.operation);
          return {
            proposal,
            agentName: agent?.name ?? proposal.agentId,
            description: operation ? `${operation.description} (${operation.name})` : proposal.operation,
            approvals: list,
            eligibility: eligibility(approver, proposal, agent, list),
          };
        });
      }

      async function pendingItems(approver: string) {
        const now = services.clock().getTime();
        // The sweeper marks expired proposals within a second; until then they are no longer decidable.
        const pending = (await services.store.listProposals({ status: 'pending', limit: PENDING_LIMIT }))
          .filter((p) => p.expiresAt.getTime() > now)
          .sort((a, b) => a.expiresAt.getTime() - b.expiresAt.getTime());
        const failed = (await services.store.listProposals({ status: 'approved', limit: 50 })).filter((p) => p.error !== null);
        return { items: await itemsFor(pending, approver), failed: await itemsFor(failed, approver) };
      }

      /** The one-line outcome shown after a form redirected back (`?done=…`). */
      async function doneNotice(request: FastifyRequest): Promise<SafeHtml | null> {
        const done = queryField(request, 'done');
        if (!done) return null;
        if (done === 'signed-in') return notice('ok', 'You are signed in.');
        if (done === 'revoked') return notice('ok', html`Agent <strong>${queryField(request, 'agent')}</strong> is revoked: its API key no longer works.`);
        const proposal = await services.store.getProposal(queryField(request, 'id'));
        if (!proposal) return null;
        const link = html`<a href="/console/proposals/${proposal.id}">${proposal.id}</a>`;
        const state = html`It is now <strong>${statusLabel(proposal.status).toLowerCase()}</strong>`;
        switch (done) {
          case 'approve':
            if (proposal.status === 'committed') return notice('ok', html`You approved ${link}. ${state}: see the executor’s result on its page.`);
            if (proposal.error) return notice('error', html`You approved ${link}, but the execution failed: ${proposal.error}`);
            return notice('ok', html`You approved ${link}. ${state}.`);
          case 'already':
            return notice('info', html`You had already approved ${link}; it counts once. ${state}.`);
          case 'reject':
            return notice('ok', html`You rejected ${link}. The agent sees your reason.`);
          case 'retry':
            return notice(proposal.error ? 'error' : 'ok', proposal.error ? html`The retry of ${link} failed again: ${proposal.error}` : html`The retry of ${link} ran. ${state}.`);
          default:
            return null;
        }
      }

      // --- assets -------------------------------------------------------------------------------

      scope.get('/assets/:file', async (request, reply) => {
        const name = (request.params as { file: string }).file;
        const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name as keyof typeof ASSETS] : undefined;
        if (!asset) return reply.callNotFound();
        const etag = `"${asset.version}"`;
        reply.header('cache-control', 'no-cache').header('etag', etag);
        if (request.headers['if-none-match'] === etag) return reply.code(304).send();
        return reply.type(asset.type).send(asset.body);
      });

      // --- sign-in ------------------------------------------------------------------------------

      scope.get('/login', async (request, reply) => {
        const token = queryField(request, 'token');
        const session = await sessionOf(request);
        const viewer = session ? viewerOf(session) : null;
        if (!token) return sendPage(request, reply, 200, { title: 'Sign in', viewer, section: 'none', body: signInPrompt(viewer) });
        // Showing the page does not spend the link: chat and mail previews fetch links by themselves.
        const check = await auth.inspectLink(token);
        if (!check.ok) return sendPage(request, reply, 403, { title: 'Sign-in refused', viewer, section: 'none', body: signInRefused(check.problem) });
        return sendPage(request, reply, 200, { title: 'Sign in', viewer, section: 'none', body: signInConfirm(token, check.approver, check.expiresAt) });
      });

      // No rate limit: a link holds 256 random bits, so guessing is hopeless, and a team behind one
      // address must be able to sign in together.
      scope.post('/login', async (request, reply) => {
        if (crossSite(request)) {
          return sendPage(request, reply, 403, { title: 'Sign-in refused', viewer: null, section: 'none', body: signInRefused('cross-site') });
        }
        const result = await auth.signIn(field(request.body, 'token') ?? '');
        if (!result.ok) return sendPage(request, reply, 403, { title: 'Sign-in refused', viewer: null, section: 'none', body: signInRefused(result.problem) });
        // Signing in again (as the same person or another) ends the session this browser had.
        const previous = await sessionOf(request);
        if (previous) await auth.signOut(previous);
        reply.setCookie(cookieName, result.secret, {
          path: '/console',
          httpOnly: true,
          sameSite: 'strict',
          secure: deps.secureCookies,
          maxAge: Math.floor(SESSION_TTL_MS / 1000),
        });
        request.log.info({ approver: result.session.approver }, 'console sign-in');
        // A redirect, so the link's token leaves the address bar and the history.
        return reply.redirect('/console?done=signed-in', 303);
      });

      scope.post('/logout', async (request, reply) => {
        const session = await formSession(request, reply);
        if (!session) return reply;
        await auth.signOut(session);
        reply.clearCookie(cookieName, { path: '/console', httpOnly: true, sameSite: 'strict', secure: deps.secureCookies });
        return sendPage(request, reply, 200, { title: 'Signed out', viewer: null, section: 'none', body: signedOutPage() });
      });

      // --- pages --------------------------------------------------------------------------------

      scope.get('/', async (request, reply) => {
        const session = await pageSession(request, reply);
        if (!session) return reply;
        const viewer = viewerOf(session);
        const { items, failed } = await pendingItems(session.approver);
        return sendPage(request, reply, 200, {
          title: 'Pending',
          viewer,
          section: 'pending',
          live: { kind: 'pending' },
          pendingCount: items.length,
          notice: await doneNotice(request),
          body: pendingPage(items, failed, viewer, services.clock()),
        });
      });

      scope.get('/fragments/pending', async (request, reply) => {
        const session = await sessionOf(request);
        if (!session) return reply.code(401).type('text/plain; charset=utf-8').send('signed out');
        const { items, failed } = await pendingItems(session.approver);
        return reply.type('text/html; charset=utf-8').send(pendingList(items, failed, viewerOf(session), services.clock()).value);
      });

      scope.get('/events', async (request, reply) => {
        const session = await sessionOf(request);
        if (!session) return reply.code(401).type('text/plain; charset=utf-8').send('signed out');
        reply.hijack();
        const raw = reply.raw;
        raw.writeHead(200, {
          ...SECURITY_HEADERS,
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          connection: 'keep-alive',
          // A buffering proxy would hold events back until its buffer fills.
          'x-accel-buffering': 'no',
        });
        raw.write('retry: 3000\n\n');
        // Only ids and statuses travel: the page fetches what it shows, with the session's rights.
        const unsubscribe = services.changes.onEvery((proposal) => {
          raw.write(`event: proposal\ndata: ${JSON.stringify({ id: proposal.id, status: proposal.status })}\n\n`);
        });
        const heartbeat = setInterval(() => {
          // A revoked or expired session stops receiving, even on a connection opened before.
          void auth.authenticate(request.cookies[cookieName]).then(
            (live) => (live ? raw.write(': keep-alive\n\n') : end()),
            () => end(),
          );
        }, SSE_HEARTBEAT_MS);
        heartbeat.unref();
        const end = () => {
          if (!streams.delete(end)) return;
          clearInterval(heartbeat);
          unsubscribe();
          raw.end();
        };
        streams.add(end);
        request.raw.once('close', end);
      });

      scope.get('/history', async (request, reply) => {
        const session = await pageSession(request, reply);
        if (!session) return reply;
        const query: HistoryQuery = {
          status: queryField(request, 'status'),
          operation: queryField(request, 'operation'),
          agent: queryField(request, 'agent'),
          approver: queryField(request, 'approver'),
          from: queryField(request, 'from'),
          to: queryField(request, 'to'),
        };
        const agents = await services.agents.list();
        const problems: string[] = [];
        const day = (text: string, name: string): Date | undefined => {
          if (!text) return undefined;
          const date = /^\d{4}-\d{2}-\d{2}$/.test(text) ? new Date(`${text}T00:00:00.000Z`) : new Date(Number.NaN);
          if (Number.isNaN(date.getTime())) problems.push(`“${name}” must be a date like 2026-11-22.`);
          return Number.isNaN(date.getTime()) ? undefined : date;
        };
        if (query.status && !STATUSES.includes(query.status as ProposalStatus)) problems.push(`Unknown status “${query.status}”.`);
        const agent = query.agent ? agents.find((a) => a.name === query.agent) : undefined;
        if (query.agent && !agent) problems.push(`No agent is named “${query.agent}”.`);
        const from = day(query.from, 'Created from');
        const toDay = day(query.to, 'Created to');
        const items =
          problems.length > 0
            ? []
            : await itemsFor(
                await queries.history({
                  status: (query.status || undefined) as ProposalStatus | undefined,
                  operation: query.operation || undefined,
                  agentId: agent?.id,
                  // "operator" means the console's web:operator; other identities are typed in full.
                  approver: query.approver ? (query.approver.includes(':') ? query.approver : `web:${query.approver}`) : undefined,
                  from,
                  // "to" names a whole day: everything created before the next midnight.
                  to: toDay ? new Date(toDay.getTime() + 86_400_000) : undefined,
                  limit: HISTORY_LIMIT,
                }),
                session.approver,
              );
        const approvers = [...new Set(services.operations().flatMap((operation) => operation.approval.approvers))].sort();
        return sendPage(request, reply, problems.length > 0 ? 400 : 200, {
          title: 'History',
          viewer: viewerOf(session),
          section: 'history',
          body: historyPage({
            query,
            operations: services.operations().map((operation) => operation.name),
            agents: agents.map((a) => a.name),
            approvers,
            items,
            limit: HISTORY_LIMIT,
            problem: problems.length > 0 ? problems.join(' ') : null,
          }),
        });
      });

      scope.get('/proposals/:id', async (request, reply) => {
        const session = await pageSession(request, reply);
        if (!session) return reply;
        const viewer = viewerOf(session);
        const { id } = request.params as { id: string };
        const proposal = await services.store.getProposal(id);
        if (!proposal) {
          return sendPage(request, reply, 404, { title: 'Not found', viewer, section: 'none', body: refusedPage('No such proposal', `There is no proposal ${id}.`, '/console/history') });
        }
        const [item] = await itemsFor([proposal], session.approver);
        if (!item) throw new TwokeyError('internal', 'proposal view missing');
        const [events, chain] = await Promise.all([services.audit.list({ proposalId: proposal.id, limit: 1000 }), services.audit.verifyRecent()]);
        return sendPage(request, reply, 200, {
          title: proposal.summary.slice(0, 80),
          viewer,
          section: 'none',
          live: { kind: 'proposal', id: proposal.id },
          notice: await doneNotice(request),
          body: proposalPage({ item, events, chain, viewer, now: services.clock(), commitMode: proposal.commitMode }),
        });
      });

      // --- decisions ----------------------------------------------------------------------------

      /** Runs a decision; a refusal by the core becomes a page with its HTTP status and a way back. */
      async function decide(
        request: FastifyRequest,
        reply: FastifyReply,
        run: (id: string, session: ConsoleSession) => Promise<string>,
      ) {
        const session = await formSession(request, reply);
        if (!session) return reply;
        const { id } = request.params as { id: string };
        const back = safeReturn(field(request.body, 'return'));
        try {
          const done = await run(id, session);
          return await reply.redirect(withParams(back, { done, id }), 303);
        } catch (error) {
          if (!isTwokeyError(error) || error.status >= 500) {
            if (isTwokeyError(error) && error.code === 'execution_failed') {
              return await reply.redirect(withParams(back, { done: 'retry', id }), 303);
            }
            throw error;
          }
          return sendPage(request, reply, error.status, {
            title: 'Not done',
            viewer: viewerOf(session),
            section: 'none',
            body: refusedPage(REFUSAL_TITLES[error.code] ?? 'Not done', explain(error), `/console/proposals/${encodeURIComponent(id)}`),
          });
        }
      }

      const decider = (session: ConsoleSession) => ({ identity: session.approver, via: 'web' });

      scope.post('/proposals/:id/approve', (request, reply) =>
        decide(request, reply, async (id, session) => {
          const { outcome } = await services.proposals.approve(id, decider(session));
          return outcome === 'already_counted' ? 'already' : 'approve';
        }),
      );

      scope.post('/proposals/:id/reject', (request, reply) =>
        decide(request, reply, async (id, session) => {
          await services.proposals.reject(id, decider(session), field(request.body, 'reason') ?? null);
          return 'reject';
        }),
      );

      scope.post('/proposals/:id/retry', (request, reply) =>
        decide(request, reply, async (id, session) => {
          await services.proposals.retry(id, decider(session));
          return 'retry';
        }),
      );

      // --- agents -------------------------------------------------------------------------------

      /**
       * Revoking is an operator action. In the console it is open to a person who approves every
       * operation the agent may propose and does not own it: they could already refuse everything
       * the agent asks for, so the kill switch gives them no power they lack. Anyone else uses the CLI.
       */
      function revokeRight(approver: string, agent: AgentRecord): AgentItem['revoke'] {
        if (agent.owners.includes(approver)) return { can: false, why: 'You own this agent; an operator revokes it.' };
        const names = agent.operations ?? services.operations().map((operation) => operation.name);
        const approves = names.length > 0 && names.every((name) => services.operation(name)?.approval.approvers.includes(approver));
        return approves ? { can: true } : { can: false, why: 'Operators only: you do not approve every operation it may propose.' };
      }

      scope.get('/agents', async (request, reply) => {
        const session = await pageSession(request, reply);
        if (!session) return reply;
        const [agents, activity, counts] = await Promise.all([services.agents.list(), queries.lastActivityByAgent(), queries.proposalCountsByAgent()]);
        const items: AgentItem[] = agents
          .sort((a, b) => Number(a.revokedAt !== null) - Number(b.revokedAt !== null) || a.name.localeCompare(b.name))
          .map((agent) => ({
            agent,
            lastActivity: activity.get(agent.id) ?? null,
            proposals: counts.get(agent.id) ?? { total: 0, pending: 0 },
            revoke: revokeRight(session.approver, agent),
          }));
        return sendPage(request, reply, 200, {
          title: 'Agents',
          viewer: viewerOf(session),
          section: 'agents',
          notice: await doneNotice(request),
          body: agentsPage(items, viewerOf(session)),
        });
      });

      scope.post('/agents/:name/revoke', async (request, reply) => {
        const session = await formSession(request, reply);
        if (!session) return reply;
        const { name } = request.params as { name: string };
        const agent = await services.store.findAgentByName(name);
        if (!agent) throw new TwokeyError('not_found', `There is no agent named “${name}”.`);
        const right = revokeRight(session.approver, agent);
        if (!right.can) {
          return sendPage(request, reply, 403, {
            title: 'Not done',
            viewer: viewerOf(session),
            section: 'none',
            body: refusedPage('You cannot revoke this agent', `${right.why} Ask an operator to run: twokey agents revoke ${agent.name}`, '/console/agents'),
          });
        }
        if (!agent.revokedAt) {
          const now = services.clock();
          await services.store.transaction(async (tx) => {
            await tx.revokeAgent(agent.id, now);
            await tx.appendAudit({ type: 'agent.revoked', actor: session.approver, agentId: agent.id, data: { name: agent.name, via: 'web' } }, now);
          });
        }
        return reply.redirect(withParams('/console/agents', { done: 'revoked', agent: agent.name }), 303);
      });
    },
    { prefix: '/console' },
  );
}
