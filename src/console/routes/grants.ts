import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { isTwokeyError } from '../../core/errors.js';
import { grantState } from '../../core/grants.js';
import type { ConsoleContext } from '../context.js';
import { doneNotice } from '../notices.js';
import { refusal, viewerOf, withParams } from '../respond.js';
import { deciderOf } from '../sign-in.js';
import { grantParams, sessionForm } from '../schemas.js';
import { grantsPage, type GrantItem } from '../views/grants.js';

const NOT_AN_APPROVER = 'Approvers of the operation revoke its grants; an operator can run: twokey grants revoke';

/** Grants in force, and their revocation through the core function `twokey grants revoke` uses. */
export const grantRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { services, guard, send }) => {
  const routes = scope.withTypeProvider<ZodTypeProvider>();

  routes.get('/grants', { preHandler: guard.page }, async (request, reply) => {
    const session = guard.session(request);
    const now = services.clock();
    const decider = deciderOf(session);
    const [entries, agents] = await Promise.all([services.grants.list({ activeAt: now }), services.agents.list()]);
    const names = new Map(agents.map((agent) => [agent.id, agent.name]));
    const items: GrantItem[] = entries
      .map((entry) => ({
        entry,
        agentName: names.get(entry.grant.agentId) ?? entry.grant.agentId,
        state: grantState(entry.grant, now),
        revoke: services.grants.mayRevoke(entry.grant, decider) ? ({ can: true } as const) : { can: false as const, why: 'Approvers of the operation only.' },
      }))
      // A used-up grant covers nothing more; `twokey grants list --all` still shows it.
      .filter((item) => item.state === 'active' || item.state === 'waiting');
    return send(reply, 200, {
      title: 'Grants',
      viewer: viewerOf(session),
      section: 'grants',
      notice: await doneNotice(services, request),
      body: grantsPage(items, viewerOf(session)),
    });
  });

  routes.post('/grants/:id/revoke', { schema: { params: grantParams, body: sessionForm }, preHandler: guard.form }, async (request, reply) => {
    const session = guard.session(request);
    const { id } = request.params;
    const refuse = (status: number, title: string, message: string) =>
      send(reply, status, refusal(viewerOf(session), { heading: title, message, back: '/console/grants' }));
    const found = await services.grants.get(id);
    if (!found) return refuse(404, 'No such grant', `There is no grant ${id}. Nothing was changed.`);
    if (!services.grants.mayRevoke(found.grant, deciderOf(session))) {
      return refuse(403, 'You cannot revoke this grant', `${NOT_AN_APPROVER} ${id}. Nothing was changed.`);
    }
    try {
      await services.grants.revoke(id, session.approver);
    } catch (error) {
      if (!isTwokeyError(error) || error.code !== 'not_pending') throw error;
      return refuse(409, 'This grant was already revoked', `${error.message}. Nothing was changed.`);
    }
    request.log.info({ grantId: id, approver: session.approver }, 'console revoked a grant');
    return reply.redirect(withParams('/console/grants', { done: 'grant-revoked', grant: id }), 303);
  });
};
