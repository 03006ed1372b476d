import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { isTwokeyError, type TwokeyError } from '../core/errors.js';
import { isDatabaseUnavailable } from '../lib/driver-errors.js';
import { DATABASE_RETRY_AFTER_SECONDS } from '../http-kit/errors.js';
import type { ConsoleContext } from './context.js';
import { createConsoleGuard } from './guard.js';
import type { ConsoleQueries, ConsoleServices } from './ports.js';
import { proposalItems } from './proposal-items.js';
import { pageSender, refusal } from './respond.js';
import { agentRoutes } from './routes/agents.js';
import { assetRoutes } from './routes/assets.js';
import { decisionRoutes } from './routes/decisions.js';
import { eventRoutes } from './routes/events.js';
import { grantRoutes } from './routes/grants.js';
import { pageRoutes } from './routes/pages.js';
import { oidcSignInRoutes } from './routes/oidc-sign-in.js';
import { passkeyRoutes } from './routes/passkeys.js';
import { signInRoutes } from './routes/sign-in.js';
import { SECURITY_HEADERS } from './security.js';
import type { OidcSignIn } from './oidc.js';
import type { ConsoleAuth } from './sign-in.js';

export interface ConsoleRouteDeps {
  services: ConsoleServices;
  auth: ConsoleAuth;
  oidc: OidcSignIn | null;
  queries: ConsoleQueries;
  /** Cookies get `Secure` when people reach twokey over https (TWOKEY_PUBLIC_URL). */
  secureCookies: boolean;
  /** The origin people use (TWOKEY_PUBLIC_URL), accepted as a form's Origin besides the Host header's. */
  publicOrigin: string | null;
}

/**
 * The console under /console: one scope with the security headers, the error pages and the form
 * parser, and inside it one plugin per part (sign-in, pages, decisions, agents, grants, events).
 */
export async function registerConsoleRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): Promise<void> {
  const { services, auth, oidc, queries, secureCookies } = deps;
  const cookieName = secureCookies ? '__Secure-twokey_session' : 'twokey_session';
  const send = pageSender(services.clock);
  const context: ConsoleContext = {
    services,
    auth,
    oidc,
    queries,
    guard: createConsoleGuard({ auth, cookieName, publicOrigin: deps.publicOrigin, send }),
    items: proposalItems(services, queries),
    send,
    cookieName,
    secureCookies,
    publicOrigin: deps.publicOrigin,
    streams: new Set(),
  };

  await app.register(
    async (scope) => {
      // The gateway may one day parse cookies or forms itself; registering either twice would throw.
      if (!scope.hasRequestDecorator('cookies')) await scope.register(cookie);
      if (!scope.hasContentTypeParser('application/x-www-form-urlencoded')) await scope.register(formbody, { bodyLimit: 16 * 1024 });

      scope.setValidatorCompiler(validatorCompiler);
      scope.setSerializerCompiler(serializerCompiler);

      scope.addHook('onSend', async (request, reply, payload) => {
        for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
        if (!request.url.startsWith('/console/assets/')) reply.header('cache-control', 'no-store');
        return payload;
      });

      scope.addHook('preClose', async () => {
        for (const end of [...context.streams]) end();
      });

      scope.setErrorHandler((error: FastifyError | TwokeyError, request, reply) => {
        if (isDatabaseUnavailable(error)) {
          request.log.warn({ code: 'database_unavailable', url: request.url }, 'console request: database unavailable');
          reply.header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS));
          const message = 'twokey cannot reach its database right now, so it cannot confirm this. Reload in a minute to see where things stand.';
          return send(reply, 503, refusal(null, { heading: 'Not done', message, back: '/console' }));
        }
        const status = isTwokeyError(error) ? error.status : (error.statusCode ?? 500);
        if (status >= 500) request.log.error({ err: error }, 'console request failed');
        const message = status >= 500 ? 'Something went wrong on the server; the log has the details for this request.' : error.message;
        return send(reply, status, refusal(null, { heading: 'Not done', message, back: '/console' }));
      });

      scope.setNotFoundHandler((_request, reply) =>
        send(reply, 404, refusal(null, { title: 'Not found', heading: 'Not found', message: 'There is no such page in the console.', back: '/console' })),
      );

      await scope.register(assetRoutes);
      await scope.register(signInRoutes, context);
      await scope.register(oidcSignInRoutes, context);
      await scope.register(pageRoutes, context);
      await scope.register(eventRoutes, context);
      await scope.register(decisionRoutes, context);
      await scope.register(agentRoutes, context);
      await scope.register(grantRoutes, context);
      await scope.register(passkeyRoutes, context);
    },
    { prefix: '/console' },
  );
}
