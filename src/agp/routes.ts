import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AgentService } from '../core/agents.js';
import { TwokeyError } from '../core/errors.js';
import type { Idempotency } from '../idempotency/index.js';
import { agentOf, authenticateAgent } from '../http/agent-routes.js';
import type { AgpService } from './service.js';

/**
 * `POST /agp/discover | query | execute/prepare | execute`, authenticated with the agent's twokey
 * key. Errors keep twokey's `{error:{code,message,requestId}}` and add the message at the top level
 * as `message`: the AGP reference SDK reads `error` when it is a string and `message` otherwise, so
 * an unchanged AGP client surfaces the exact text ("Confirmation token expired. Prepare a new token.").
 */

export interface AgpRouteDeps {
  agp: AgpService;
  agents: Pick<AgentService, 'authenticate'>;
  rateLimit: { max: number; timeWindowMs: number };
  /** Applied to POST /agp/execute. */
  idempotency?: Idempotency;
}

const businessId = { type: 'string', minLength: 1, maxLength: 64 } as const;
const agpRequest = { type: 'object' } as const;

const errorResponse = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        requestId: { type: 'string' },
        details: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
      },
    },
    message: { type: 'string' },
  },
} as const;

const envelopeResponse = {
  type: 'object',
  properties: {
    transactionId: { type: 'string' },
    operation: { type: 'string' },
    businessId: { type: 'string' },
    status: { type: 'string' },
    data: {},
  },
} as const;

const withRequest = {
  type: 'object',
  required: ['businessId', 'request'],
  additionalProperties: false,
  properties: { businessId, request: agpRequest },
} as const;

function singleHeader(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  if (Array.isArray(value)) throw new TwokeyError('invalid_request', `send one ${name} header`);
  return value;
}

export function registerAgpRoutes(app: FastifyInstance, deps: AgpRouteDeps): void {
  // Under a prefix so an unknown /agp/… path gets this scope's hooks too: the same 404, plus the
  // top-level `message` AGP clients read.
  app.register(async (agp) => {
    agp.addHook('onRequest', authenticateAgent(deps.agents));
    agp.setNotFoundHandler((request) => {
      throw new TwokeyError('not_found', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`);
    });

    agp.addHook('onSend', async (_request, reply, payload) => {
      if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
      try {
        const body = JSON.parse(payload) as { error?: { message?: unknown }; message?: unknown };
        if (typeof body.error?.message === 'string' && body.message === undefined) {
          return JSON.stringify({ ...body, message: body.error.message });
        }
      } catch {
        // Not JSON: nothing to add.
      }
      return payload;
    });

    const limited = {
      rateLimit: {
        max: deps.rateLimit.max,
        timeWindow: deps.rateLimit.timeWindowMs,
        keyGenerator: (request: FastifyRequest) => request.agent?.id ?? request.ip,
      },
    };

    agp.post(
      '/discover',
      {
        config: limited,
        schema: {
          body: { type: 'object', required: ['businessId'], additionalProperties: false, properties: { businessId } },
          response: { 200: envelopeResponse, '4xx': errorResponse, '5xx': errorResponse },
        },
      },
      async (request) => {
        const body = request.body as { businessId: string };
        return deps.agp.discover(agentOf(request), body.businessId);
      },
    );

    agp.post(
      '/query',
      { config: limited, schema: { body: withRequest, response: { 200: envelopeResponse, '4xx': errorResponse, '5xx': errorResponse } } },
      async (request) => {
        const body = request.body as { businessId: string; request: Record<string, unknown> };
        return deps.agp.query(agentOf(request), body.businessId, body.request);
      },
    );

    agp.post(
      '/execute/prepare',
      {
        config: limited,
        schema: {
          body: withRequest,
          response: {
            200: {
              type: 'object',
              properties: {
                confirmationToken: { type: 'string' },
                expiresAt: { type: 'string' },
                summary: { type: 'string' },
                businessId: { type: 'string' },
                proposalId: { type: 'string' },
                approval: { type: 'object', properties: { status: { type: 'string' }, quorum: { type: 'integer' } } },
              },
            },
            '4xx': errorResponse,
            '5xx': errorResponse,
          },
        },
      },
      async (request) => {
        const body = request.body as { businessId: string; request: Record<string, unknown> };
        return deps.agp.prepare(agentOf(request), body.businessId, body.request);
      },
    );

    agp.post(
      '/execute',
      {
        config: limited,
        schema: { body: withRequest, response: { 200: envelopeResponse, '4xx': errorResponse, '5xx': errorResponse } },
        ...(deps.idempotency ? { preHandler: deps.idempotency.preHandler, onSend: deps.idempotency.onSend } : {}),
      },
      async (request) => {
        const body = request.body as { businessId: string; request: Record<string, unknown> };
        return deps.agp.execute(agentOf(request), body.businessId, body.request, {
          confirmationToken: singleHeader(request, 'x-confirmation-token'),
          idempotencyKey: singleHeader(request, 'idempotency-key'),
        });
      },
    );
  }, { prefix: '/agp' });
}
