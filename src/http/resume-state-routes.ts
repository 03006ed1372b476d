import type { FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { TwokeyError } from '../core/errors.js';
import type { AgentRecord, Clock } from '../core/model.js';
import { seal, unseal } from '../idempotency/seal.js';
import type { FailedAuthLimiter } from '../limits/index.js';
import { agentOf, authenticateAgent, bearerKey, perAgentRateLimit } from '../http-kit/agent-auth.js';
import type { AgentApiServices, ResumeStates } from './ports.js';
import { apiSchemas, errorBodySchema } from '../http-kit/api-schemas.js';
import { MAX_RESUME_STATE_CHARS, proposalIdParamsSchema, resumeStateBodySchema, resumeStateSchema } from './schemas.js';

export { MAX_RESUME_STATE_CHARS };

export interface ResumeStateRouteDeps {
  agents: AgentApiServices['agents'];
  proposals: Pick<AgentApiServices['proposals'], 'viewForAgent'>;
  resumeStates: ResumeStates;
  clock: Clock;
  rateLimit: { max: number; timeWindowMs: number };
  failedAuth: FailedAuthLimiter;
}

const scopeOf = (agent: AgentRecord, proposalId: string) => `resume-state:${agent.id}:${proposalId}`;

const agentKey = [{ agentKey: [] }];
const errors = { '4xx': errorBodySchema, '5xx': errorBodySchema };

/**
 * `PUT|GET /v1/proposals/:id/resume-state`: an agent parks what it needs to resume a run beside its
 * own proposal and reads it back after the decision, possibly from another process or host.
 */
export function registerResumeStateRoutes(app: FastifyInstance, deps: ResumeStateRouteDeps): void {
  app.register(async (scope) => {
    scope.setValidatorCompiler(validatorCompiler);
    scope.setSerializerCompiler(serializerCompiler);
    scope.addHook('onRequest', authenticateAgent(deps.agents, deps.failedAuth));
    const routes = scope.withTypeProvider<ZodTypeProvider>();
    const limited = perAgentRateLimit(deps.rateLimit);

    routes.put(
      '/v1/proposals/:id/resume-state',
      {
        config: limited,
        bodyLimit: MAX_RESUME_STATE_CHARS * 2,
        schema: {
          tags: ['agent API'],
          summary: 'Park what the agent needs to resume a paused run beside its proposal',
          security: agentKey,
          params: proposalIdParamsSchema,
          body: resumeStateBodySchema,
          response: { 204: z.undefined().register(apiSchemas, { description: 'Stored' }), ...errors },
        },
      },
      async (request, reply) => {
        const agent = agentOf(request);
        const { id } = request.params;
        const { state } = request.body;
        // Another agent's proposal, or none, is not found: the same answer GET /v1/proposals/:id gives.
        await deps.proposals.viewForAgent(agent, id);
        await deps.resumeStates.put(id, agent.id, { ...seal(state, bearerKey(request), scopeOf(agent, id)) }, deps.clock());
        return reply.status(204).send();
      },
    );

    routes.get(
      '/v1/proposals/:id/resume-state',
      {
        config: limited,
        schema: {
          tags: ['agent API'],
          summary: 'Read back the parked resume state (only with the API key that parked it)',
          security: agentKey,
          params: proposalIdParamsSchema,
          response: { 200: resumeStateSchema, ...errors },
        },
      },
      async (request) => {
        const agent = agentOf(request);
        const { id } = request.params;
        const sealed = await deps.resumeStates.get(id, agent.id);
        const state = sealed ? unseal(sealed, bearerKey(request), scopeOf(agent, id)) : null;
        if (state === null) throw new TwokeyError('not_found', `no resume state for proposal ${id} that this API key can open`);
        return { state };
      },
    );
  });
}
