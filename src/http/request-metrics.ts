import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Counter, Histogram } from 'prom-client';
import { RefusalError, TwokeyError } from '../core/errors.js';

/** The series every answered request feeds (created in `src/runtime/metrics.ts`). */
export interface RequestMetrics {
  requestSeconds: Pick<Histogram<'route' | 'method' | 'status'>, 'observe'>;
  authRefusals: Pick<Counter<'route' | 'reason'>, 'inc'>;
  rateLimitRefusals: Pick<Counter<'route' | 'limit'>, 'inc'>;
}

/** The route's pattern (`/v1/proposals/:id`), never the URL: ids, and whatever a client put in a path, stay out of the labels. */
function routeOf(request: FastifyRequest): string {
  return request.routeOptions.url ?? 'unmatched';
}

/** Routes that answer 401 themselves, with no error to name the reason: a chat platform's signature, a console session. */
function reasonOfOwnRefusal(route: string): string {
  if (route.startsWith('/slack/') || route.startsWith('/discord/')) return 'bad_signature';
  if (route === '/console' || route.startsWith('/console/')) return 'no_session';
  return 'other';
}

/**
 * Root hooks, so they reach every route of every plugin: each answered request is timed by route,
 * method and status, and each 401 and 429 is counted with the check that refused it.
 */
export function recordRequestMetrics(app: FastifyInstance, metrics: RequestMetrics): void {
  const refusals = new WeakMap<FastifyRequest, string>();
  app.addHook('onError', async (request, _reply, error) => {
    if (!(error instanceof TwokeyError) || (error.status !== 401 && error.status !== 429)) return;
    refusals.set(request, error instanceof RefusalError ? error.reason : 'other');
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = routeOf(request);
    const status = reply.statusCode;
    metrics.requestSeconds.observe({ route, method: request.method, status: String(status) }, reply.elapsedTime / 1000);
    if (status === 401) metrics.authRefusals.inc({ route, reason: refusals.get(request) ?? reasonOfOwnRefusal(route) });
    if (status === 429) metrics.rateLimitRefusals.inc({ route, limit: refusals.get(request) ?? 'other' });
  });
}
