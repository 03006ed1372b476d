import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TwokeyError } from '../core/errors.js';
import { agentOf, asAgentScope, perAgentRateLimit } from '../http-kit/agent-auth.js';
import type { FailedAuthLimiter } from '../limits/index.js';
import { agpCallBodySchema, agpEnvelopeSchema, agpErrorSchema, discoverBodySchema, executeHeadersSchema, prepareAnswerSchema } from './schemas.js';
import type { AgpServices, OpenExecuteRecord } from './ports.js';
import type { AgpService } from './service.js';

/**
 * `POST /agp/discover | query | execute/prepare | execute`, authenticated with the agent's twokey
 * key. Errors keep twokey's `{error:{code,message,requestId}}` and add the message at the top level
 * as `message`: the AGP reference SDK reads `error` when it is a string and `message` otherwise, so
 * an unchanged AGP client surfaces the exact text ("Confirmation token expired. Prepare a new token.").
 */

export interface AgpRouteDeps {
  agp: AgpService;
  agents: AgpServices['agents'];
  rateLimit: { max: number; timeWindowMs: number };
  failedAuth: FailedAuthLimiter;
  /** The Idempotency-Key hooks' store for an `open` execute's record, written with the key's outcome (src/idempotency). */
  idempotency?: { attach(request: FastifyRequest, record: OpenExecuteRecord): boolean };
}

const agentKey = [{ agentKey: [] }];
const errors = { '4xx': agpErrorSchema, '5xx': agpErrorSchema };

function singleHeader(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  if (Array.isArray(value)) throw new TwokeyError('invalid_request', `send one ${name} header`);
  return value;
}

export function registerAgpRoutes(app: FastifyInstance, deps: AgpRouteDeps): void {
  // Under a prefix so an unknown /agp/… path gets this scope's hooks too: the same 404, plus the
  // top-level `message` AGP clients read.
  app.register(
    async (scope) => {
      const agp = asAgentScope(scope, deps);
      scope.setNotFoundHandler((request) => {
        throw new TwokeyError('not_found', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`);
      });

      // Before serialization, so the error schema (with its top-level `message`) checks the result.
      scope.addHook('preSerialization', async (_request, reply, payload: unknown) => {
        if (reply.statusCode < 400 || typeof payload !== 'object' || payload === null || 'message' in payload) return payload;
        const error: unknown = 'error' in payload ? payload.error : undefined;
        const message = typeof error === 'object' && error !== null && 'message' in error ? error.message : undefined;
        return typeof message === 'string' ? { ...payload, message } : payload;
      });

      const limited = perAgentRateLimit(deps.rateLimit);
      const { idempotency } = deps;

      agp.post(
        '/discover',
        {
          config: limited,
          schema: {
            tags: ['AGP'],
            summary: "A business's capabilities",
            security: agentKey,
            body: discoverBodySchema,
            response: { 200: agpEnvelopeSchema, ...errors },
          },
        },
        async (request) => deps.agp.discover(agentOf(request), request.body.businessId),
      );

      agp.post(
        '/query',
        {
          config: limited,
          schema: {
            tags: ['AGP'],
            summary: 'A read-only question to a business',
            security: agentKey,
            body: agpCallBodySchema,
            response: { 200: agpEnvelopeSchema, ...errors },
          },
        },
        async (request) => deps.agp.query(agentOf(request), request.body.businessId, request.body.request),
      );

      agp.post(
        '/execute/prepare',
        {
          config: limited,
          schema: {
            tags: ['AGP'],
            summary: 'Step 1 of the Execute Handoff: a confirmation token for exactly this request',
            description: 'When the business needs a human, the answer names the proposal to follow; the token works once it is approved.',
            security: agentKey,
            body: agpCallBodySchema,
            response: { 200: prepareAnswerSchema, ...errors },
          },
        },
        async (request) => deps.agp.prepare(agentOf(request), request.body.businessId, request.body.request),
      );

      agp.post(
        '/execute',
        {
          config: limited,
          schema: {
            tags: ['AGP'],
            summary: 'Step 2 of the Execute Handoff: the same request, with the token',
            security: agentKey,
            headers: executeHeadersSchema,
            body: agpCallBodySchema,
            response: { 200: agpEnvelopeSchema, ...errors },
          },
        },
        async (request, reply) => {
          const answer = await deps.agp.execute(agentOf(request), request.body.businessId, request.body.request, {
            confirmationToken: singleHeader(request, 'x-confirmation-token'),
            idempotencyKey: singleHeader(request, 'idempotency-key'),
            recordWithKey: idempotency ? (record) => idempotency.attach(request, record) : undefined,
          });
          if (answer.replayed) reply.header('idempotent-replayed', 'true');
          return answer;
        },
      );
    },
    { prefix: '/agp' },
  );
}
