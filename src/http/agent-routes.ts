import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AgentService } from '../core/agents.js';
import type { ChangeFeed } from '../core/changes.js';
import { TwokeyError } from '../core/errors.js';
import type { AgentRecord, OperationSpec } from '../core/model.js';
import type { ProposalService } from '../core/proposals.js';
import { finalStatuses } from '../core/model.js';

declare module 'fastify' {
  interface FastifyRequest {
    agent?: AgentRecord;
  }
}

export interface AgentRouteDeps {
  agents: AgentService;
  proposals: ProposalService;
  changes: ChangeFeed;
  operations(): OperationSpec[];
  rateLimit: { max: number; timeWindowMs: number };
  longPollIntervalMs: number;
}

const MAX_WAIT_SECONDS = 60;

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
  },
} as const;

const approvalList = {
  type: 'array',
  items: { type: 'object', properties: { approver: { type: 'string' }, at: { type: 'string' } } },
} as const;

const proposalView = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    status: { type: 'string' },
    operation: { type: 'string' },
    params: { type: 'object', additionalProperties: true },
    summary: { type: 'string' },
    expiresAt: { type: 'string' },
    quorum: { type: 'integer' },
    approvals: approvalList,
    decision: {
      type: ['object', 'null'],
      properties: { by: { type: 'string' }, at: { type: 'string' }, reason: { type: ['string', 'null'] } },
    },
    result: {},
    error: { type: ['string', 'null'] },
  },
} as const;

const proposalIdParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

const operationAndParams = {
  operation: { type: 'string', minLength: 1, maxLength: 64 },
  params: { type: 'object' },
} as const;

function bearerKey(request: FastifyRequest): string {
  const header = request.headers.authorization;
  const match = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
  if (!match?.[1]) throw new TwokeyError('unauthorized', 'missing "Authorization: Bearer tk_agent_…" header');
  return match[1];
}

/** An onRequest hook for every agent-facing route (/v1, /agp): the caller's API key becomes `request.agent`. */
export function authenticateAgent(agents: Pick<AgentService, 'authenticate'>) {
  return async (request: FastifyRequest): Promise<void> => {
    request.agent = await agents.authenticate(bearerKey(request));
  };
}

export function agentOf(request: FastifyRequest): AgentRecord {
  if (!request.agent) throw new TwokeyError('unauthorized', 'not authenticated');
  return request.agent;
}

export function registerAgentRoutes(app: FastifyInstance, deps: AgentRouteDeps): void {
  app.register(async (v1) => {
    v1.addHook('onRequest', authenticateAgent(deps.agents));

    const limited = {
      rateLimit: {
        max: deps.rateLimit.max,
        timeWindow: deps.rateLimit.timeWindowMs,
        // Per agent: one noisy agent must not starve the others.
        keyGenerator: (request: FastifyRequest) => request.agent?.id ?? request.ip,
      },
    };

    v1.get('/v1/operations', { config: limited }, async (request) => {
      const agent = agentOf(request);
      const operations = deps
        .operations()
        .filter((operation) => !agent.operations || agent.operations.includes(operation.name))
        .map((operation) => ({
          name: operation.name,
          description: operation.description,
          confirmationType: operation.confirmationType,
          params: operation.paramsSchema,
          quorum: operation.approval.quorum,
          commit: operation.commit,
          expiresInSeconds: Math.round(operation.expiresInMs / 1000),
        }));
      return { operations };
    });

    v1.post(
      '/v1/proposals',
      {
        config: limited,
        schema: {
          body: {
            type: 'object',
            required: ['operation', 'params'],
            additionalProperties: false,
            properties: {
              ...operationAndParams,
              callbackUrl: { type: 'string', maxLength: 2048, pattern: '^https?://' },
            },
          },
          response: {
            201: {
              type: 'object',
              properties: {
                ...proposalView.properties,
                confirmToken: { type: 'string' },
              },
            },
            '4xx': errorResponse,
          },
        },
      },
      async (request, reply) => {
        const body = request.body as { operation: string; params: Record<string, unknown>; callbackUrl?: string };
        const { proposal, confirmToken } = await deps.proposals.propose(agentOf(request), body);
        return reply.status(201).send({
          id: proposal.id,
          status: proposal.status,
          operation: proposal.operation,
          summary: proposal.summary,
          expiresAt: proposal.expiresAt.toISOString(),
          confirmToken,
          quorum: proposal.quorum,
          approvals: [],
        });
      },
    );

    v1.get(
      '/v1/proposals/:id',
      {
        config: limited,
        schema: {
          params: proposalIdParams,
          querystring: {
            type: 'object',
            additionalProperties: false,
            // Query strings are text and types are never coerced: the number is checked by pattern.
            properties: { wait: { type: 'string', pattern: '^(60|[1-5]?[0-9])(\\.[0-9]+)?$' } },
          },
          response: { 200: proposalView, '4xx': errorResponse },
        },
      },
      async (request) => {
        const agent = agentOf(request);
        const { id } = request.params as { id: string };
        const wait = Math.min(MAX_WAIT_SECONDS, Number((request.query as { wait?: string }).wait ?? 0));
        const first = await deps.proposals.viewForAgent(agent, id);
        if (!wait || finalStatuses.includes(first.status)) return first;
        const aborted = new AbortController();
        request.raw.once('close', () => aborted.abort());
        const deadline = Date.now() + wait * 1000;
        const fingerprint = (view: typeof first) => `${view.status}/${view.approvals.length}/${view.error ?? ''}`;
        for (;;) {
          // Subscribe before re-reading, so a change between the two is not missed. The feed wakes us
          // at once for changes made here (and, on PostgreSQL, on any replica); the interval is the
          // fallback that also covers the embedded database, which has no cross-process notifications.
          const changed = deps.changes.next(id, Math.min(deps.longPollIntervalMs, Math.max(0, deadline - Date.now())), aborted.signal);
          const latest = await deps.proposals.viewForAgent(agent, id);
          if (fingerprint(latest) !== fingerprint(first) || Date.now() >= deadline || aborted.signal.aborted) return latest;
          await changed;
        }
      },
    );

    v1.post(
      '/v1/proposals/:id/commit',
      {
        config: limited,
        schema: {
          params: proposalIdParams,
          body: {
            type: 'object',
            required: ['operation', 'params'],
            additionalProperties: false,
            properties: operationAndParams,
          },
          response: {
            200: { type: 'object', properties: { status: { type: 'string' }, result: {} } },
            '4xx': errorResponse,
          },
        },
      },
      async (request) => {
        const token = request.headers['x-confirmation-token'];
        if (typeof token !== 'string' || token.length === 0) {
          throw new TwokeyError('invalid_token', 'missing X-Confirmation-Token header');
        }
        const { id } = request.params as { id: string };
        const claim = request.body as { operation: string; params: Record<string, unknown> };
        const proposal = await deps.proposals.commit(agentOf(request), id, token, claim);
        return { status: proposal.status, result: proposal.result ?? null };
      },
    );

    v1.post(
      '/v1/proposals/:id/cancel',
      {
        config: limited,
        schema: { params: proposalIdParams, response: { 200: proposalView, '4xx': errorResponse } },
      },
      async (request) => {
        const agent = agentOf(request);
        const { id } = request.params as { id: string };
        await deps.proposals.cancel(agent, id);
        return deps.proposals.viewForAgent(agent, id);
      },
    );
  });
}
