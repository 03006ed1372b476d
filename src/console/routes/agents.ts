import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { isTwokeyError } from '../../core/errors.js';
import type { ConsoleContext } from '../context.js';
import { doneNotice } from '../notices.js';
import { refusal, viewerOf, withParams } from '../respond.js';
import { agentParams, sessionForm } from '../schemas.js';
import { agentsPage, type AgentItem } from '../views/agents.js';

/** The agents and their last activity; revocation for those the core's rule allows (agentRevokeRight). */
export const agentRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { services, queries, guard, send }) => {
  const routes = scope.withTypeProvider<ZodTypeProvider>();

  routes.get('/agents', { preHandler: guard.page }, async (request, reply) => {
    const session = guard.session(request);
    const [agents, activity, counts] = await Promise.all([services.agents.list(), queries.lastActivityByAgent(), queries.proposalCountsByAgent()]);
    const items: AgentItem[] = agents
      .sort((a, b) => Number(a.revokedAt !== null) - Number(b.revokedAt !== null) || a.name.localeCompare(b.name))
      .map((agent) => ({
        agent,
        lastActivity: activity.get(agent.id) ?? null,
        proposals: counts.get(agent.id) ?? { total: 0, pending: 0 },
        revoke: services.agents.revokeRightOf(session.approver, agent),
      }));
    return send(reply, 200, {
      title: 'Agents',
      viewer: viewerOf(session),
      section: 'agents',
      notice: await doneNotice(services, request),
      body: agentsPage(items, viewerOf(session)),
    });
  });

  routes.post('/agents/:name/revoke', { schema: { params: agentParams, body: sessionForm }, preHandler: guard.form }, async (request, reply) => {
    const session = guard.session(request);
    const { name } = request.params;
    try {
      await services.agents.revokeAsPerson(name, { actor: session.approver, via: 'web' });
    } catch (error) {
      if (!isTwokeyError(error) || error.code !== 'not_an_approver') throw error;
      return send(
        reply,
        403,
        refusal(viewerOf(session), {
          heading: 'You cannot revoke this agent',
          message: `${error.message} Ask an operator to run: twokey agents revoke ${name}`,
          back: '/console/agents',
        }),
      );
    }
    return reply.redirect(withParams('/console/agents', { done: 'revoked', agent: name }), 303);
  });
};
