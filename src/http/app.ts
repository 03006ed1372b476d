import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { TwokeyError } from '../core/errors.js';
import { randomBytes } from 'node:crypto';
import { registerAgentRoutes, type AgentRouteDeps } from './agent-routes.js';
import { installErrorHandling } from './errors.js';
import { registerHealthRoutes, type HealthRouteDeps } from './health-routes.js';

export interface HttpAppDeps extends AgentRouteDeps, HealthRouteDeps {
  logger: FastifyBaseLogger;
  bodyLimitBytes?: number;
}

/** A secret in a URL ends up in proxy logs and browser history, whatever twokey does with it. */
const SECRET_IN_URL = /tk_(?:conf|agent)_|whsec_/;

export async function buildHttpApp(deps: HttpAppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimitBytes ?? 256 * 1024,
    genReqId: () => `req_${randomBytes(9).toString('base64url')}`,
    requestTimeout: 90_000,
    // Unknown body properties are refused, not silently dropped, and types are never coerced.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } },
  });

  installErrorHandling(app);

  app.addHook('onRequest', async (request) => {
    if (SECRET_IN_URL.test(request.url)) {
      throw new TwokeyError('invalid_request', 'secrets must never be sent in a URL; use the Authorization and X-Confirmation-Token headers');
    }
  });

  await app.register(rateLimit, {
    global: false,
    errorResponseBuilder: () => new TwokeyError('rate_limited', 'too many requests for this API key; slow down'),
  });

  registerHealthRoutes(app, deps);
  registerAgentRoutes(app, deps);
  return app;
}
