import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { RefusalError, TwokeyError } from '../core/errors.js';
import { randomBytesFromPool } from '../lib/random.js';
import { registerAgentRoutes, type AgentRouteDeps } from './agent-routes.js';
import { answerFrameworkError, installErrorHandling } from '../http-kit/errors.js';
import { registerHealthRoutes, type HealthRouteDeps } from './health-routes.js';
import { refuseUnsafeNumbers } from './unsafe-numbers.js';
import { registerOpenApi } from './openapi.js';
import { withIncomingTrace } from '../tracing/index.js';
import { recordRequestMetrics, type RequestMetrics } from './request-metrics.js';

export interface HttpAppDeps extends AgentRouteDeps, HealthRouteDeps {
  logger: FastifyBaseLogger;
  bodyLimitBytes?: number;
  /** A @fastify/rate-limit store shared by every replica; the default keeps counters in this process. */
  rateLimitStore?: NonNullable<RateLimitPluginOptions['store']>;
  /** Times every request and counts 401s and 429s for /metrics. */
  requestMetrics?: RequestMetrics;
  /**
   * Which proxies' `X-Forwarded-For` names the client (`TWOKEY_TRUST_PROXY`); off by default, so the
   * client address is the connection's peer and a forged header changes nothing.
   */
  trustProxy?: TrustProxy;
}

export type TrustProxy = boolean | string[];

/** A secret in a URL ends up in proxy logs and browser history, whatever twokey does with it. */
const SECRET_IN_URL = /tk_(?:conf|agent)_|whsec_/;

/** Where agents call: their requests' `traceparent` is honoured (the other routes are people and chat platforms). */
const AGENT_ROUTE = /^\/(v1|agp|mcp)(?:[/?]|$)/;

/** Far deeper than any request needs, far shallower than what overflows the stack of recursive code (RFC 8785 hashing). */
export const MAX_JSON_DEPTH = 64;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why a parsed JSON body cannot be taken, or null. Valid JSON all of it, but PostgreSQL stores no
 * NUL (`\u0000`) in jsonb or text, RFC 8785 canonicalisation refuses lone surrogates, and deep
 * nesting overflows recursive code: refused here, once, as the client's error. Iterative on purpose.
 */
export function unstorableJson(value: unknown): string | null {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const texts = typeof next.value === 'string' ? [next.value] : [];
    if (typeof next.value === 'object' && next.value !== null) {
      if (next.depth >= MAX_JSON_DEPTH) return `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`;
      const entries = Array.isArray(next.value) ? next.value.map((item) => ['', item] as const) : Object.entries(next.value);
      for (const [key, item] of entries) {
        texts.push(key);
        pending.push({ value: item, depth: next.depth + 1 });
      }
    }
    for (const text of texts) {
      if (text.includes('\u0000')) return 'the JSON body contains NUL (\\u0000), which twokey cannot store';
      if (LONE_SURROGATE.test(text)) return 'the JSON body contains a lone UTF-16 surrogate, which is not Unicode text';
    }
  }
  return null;
}

/**
 * Two info lines per request cost a quarter of a busy server's CPU: one line per request, at debug,
 * and errors as before.
 */
class QuietRequestLog extends LogController {
  override incomingRequest(): void {}
  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    if (error) return super.requestCompleted(error, request, reply, {});
    reply.log.debug({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

export async function buildHttpApp(deps: HttpAppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimitBytes ?? 256 * 1024,
    genReqId: () => `req_${randomBytesFromPool(9).toString('base64url')}`,
    trustProxy: deps.trustProxy ?? false,
    requestTimeout: 90_000,
    logController: new QuietRequestLog(),
    // Unknown body properties are refused, not silently dropped, and types are never coerced.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } },
    frameworkErrors: (error, request, reply) => answerFrameworkError(error, request, reply),
  });

  installErrorHandling(app);
  if (deps.requestMetrics) recordRequestMetrics(app, deps.requestMetrics);

  // Before any route: each agent route's handler runs in the trace its request names, so the
  // proposal it makes joins that trace (a no-op without an OpenTelemetry SDK).
  app.addHook('onRoute', (route) => {
    if (!AGENT_ROUTE.test(route.url)) return;
    const handler = route.handler;
    route.handler = function inRequestTrace(request, reply) {
      return withIncomingTrace(request.headers, () => handler.call(this, request, reply));
    };
  });

  // fastify's own JSON parser (same prototype-poisoning refusals), then what twokey cannot store.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // The default JSON parser answers through `done`; its type also admits an async parser, whose promise would carry nothing.
    void parseJson(request, typeof body === 'string' ? body : body.toString('utf8'), (error, parsed) => {
      if (error) return done(error);
      const problem = unstorableJson(parsed);
      if (problem) return done(new TwokeyError('invalid_request', problem));
      try {
        refuseUnsafeNumbers(parsed);
      } catch (refusal) {
        return done(refusal as TwokeyError);
      }
      return done(null, parsed);
    });
  });

  app.addHook('onRequest', async (request) => {
    if (SECRET_IN_URL.test(request.url)) {
      throw new TwokeyError('invalid_request', 'secrets must never be sent in a URL; use the Authorization and X-Confirmation-Token headers');
    }
    // A NUL reaching a query (a proposal id) is a database error, not a missing row.
    if (/%00/.test(request.url)) throw new TwokeyError('invalid_request', 'the URL contains NUL (%00)');
  });

  await app.register(rateLimit, {
    global: false,
    ...(deps.rateLimitStore ? { store: deps.rateLimitStore } : {}),
    errorResponseBuilder: () => new RefusalError('rate_limited', 'requests', 'too many requests for this API key; slow down'),
  });

  // First: the document describes the routes registered after it (here and in startTwokey).
  await registerOpenApi(app);
  registerHealthRoutes(app, deps);
  registerAgentRoutes(app, deps);
  return app;
}
