import type { FastifyInstance, FastifyRequest } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AgentService } from '../core/agents.js';
import { RefusalError, TwokeyError } from '../core/errors.js';
import type { AgentRecord } from '../core/model.js';
import { bearerAuthHook, bearerToken, type FailedAuthCounter } from '../lib/bearer-auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    agent?: AgentRecord;
  }
}

const missingKey = () => new RefusalError('unauthorized', 'missing_key', 'missing "Authorization: Bearer tk_agent_…" header');

/** The agent's API key from `Authorization: Bearer …`; 401 when there is none. */
export function bearerKey(request: FastifyRequest): string {
  const key = bearerToken(request);
  if (key === null) throw missingKey();
  return key;
}

/**
 * An onRequest hook for every agent-facing route (/v1, /agp, /mcp): the caller's API key becomes
 * `request.agent`. Every refused key counts against `failedAuth` (required, so no agent route can
 * leave its refusals uncounted); a valid key is served whatever others failed.
 */
export function authenticateAgent(agents: Pick<AgentService, 'authenticate'>, failedAuth: FailedAuthCounter) {
  return bearerAuthHook<AgentRecord>({
    authenticate: (key) => agents.authenticate(key),
    missingToken: missingKey,
    isRefusal: (error) => error instanceof TwokeyError && error.code === 'unauthorized',
    attach: (request, agent) => {
      request.agent = agent;
    },
    failures: failedAuth,
  });
}

export function agentOf(request: FastifyRequest): AgentRecord {
  if (!request.agent) throw new TwokeyError('unauthorized', 'not authenticated');
  return request.agent;
}

/**
 * A route's `config` that rate-limits per agent (per address before authentication), so one noisy
 * agent cannot starve the others.
 */
export function perAgentRateLimit(limit: { max: number; timeWindowMs: number }) {
  return {
    rateLimit: {
      max: limit.max,
      timeWindow: limit.timeWindowMs,
      keyGenerator: (request: FastifyRequest) => request.agent?.id ?? request.ip,
    },
  };
}

/** Makes a scope the agents' own: zod schemas for its routes, and only an agent's key gets in (the agent API's and AGP's). */
export function asAgentScope(scope: FastifyInstance, deps: { agents: Pick<AgentService, 'authenticate'>; failedAuth: FailedAuthCounter }) {
  scope.setValidatorCompiler(validatorCompiler);
  scope.setSerializerCompiler(serializerCompiler);
  scope.addHook('onRequest', authenticateAgent(deps.agents, deps.failedAuth));
  return scope.withTypeProvider<ZodTypeProvider>();
}
