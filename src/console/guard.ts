import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { TwokeyError } from '../core/errors.js';
import type { SendPage } from './respond.js';
import { field, refusal, viewerOf } from './respond.js';
import { csrfTokenMatches, type ConsoleAuth, type ConsoleSession } from './sign-in.js';

export interface GuardOptions {
  auth: ConsoleAuth;
  cookieName: string;
  /** The origin people use (TWOKEY_PUBLIC_URL), accepted as a form's Origin besides the Host header's. */
  publicOrigin: string | null;
  send: SendPage;
}

/**
 * The session and CSRF guard. Routes put one of its hooks in `preHandler`: `page` sends a person
 * without a session to the sign-in page, `fetch` answers script requests with a bare 401, and `form`
 * refuses a post without a session, from another site, or without the session's CSRF token, before
 * the handler runs. Handlers then read the session with `session(request)`.
 */
export function createConsoleGuard(options: GuardOptions) {
  const { auth, cookieName, send } = options;
  const sessions = new WeakMap<FastifyRequest, ConsoleSession>();

  const sessionOf = (request: FastifyRequest): Promise<ConsoleSession | null> => auth.authenticate(request.cookies[cookieName]);

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
    const allowed = new Set([options.publicOrigin, host ? `http://${host}` : null, host ? `https://${host}` : null]);
    return !allowed.has(origin);
  }

  const page: preHandlerAsyncHookHandler = async (request, reply) => {
    const session = await sessionOf(request);
    if (!session) return reply.redirect('/console/login', 303);
    sessions.set(request, session);
  };

  const fetch: preHandlerAsyncHookHandler = async (request, reply) => {
    const session = await sessionOf(request);
    if (!session) return reply.code(401).type('text/plain; charset=utf-8').send('signed out');
    sessions.set(request, session);
  };

  const form: preHandlerAsyncHookHandler = async (request, reply): Promise<FastifyReply | undefined> => {
    const session = await sessionOf(request);
    if (!session) {
      return send(
        reply,
        401,
        refusal(null, {
          title: 'Signed out',
          heading: 'Your session has ended',
          message: 'Sign in again with a new link; nothing was changed.',
          back: '/console/login',
        }),
      );
    }
    if (crossSite(request) || !csrfTokenMatches(session, field(request.body, '_csrf'))) {
      request.log.warn({ approver: session.approver, url: request.url }, 'console form refused: missing or wrong CSRF token');
      return send(
        reply,
        403,
        refusal(viewerOf(session), {
          title: 'Form refused',
          heading: 'This form could not be verified',
          message: 'The form did not carry this session’s security token, or came from another site. Nothing was changed. Reload the page and try again.',
          back: '/console',
        }),
      );
    }
    sessions.set(request, session);
    return undefined;
  };

  /** The session a guard hook found for this request. */
  function session(request: FastifyRequest): ConsoleSession {
    const found = sessions.get(request);
    if (!found) throw new TwokeyError('internal', `console route ${request.url} has no session guard`);
    return found;
  }

  return { page, fetch, form, session, sessionOf, crossSite };
}

export type ConsoleGuard = ReturnType<typeof createConsoleGuard>;
