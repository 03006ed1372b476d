import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { TwokeyError } from '../../core/errors.js';
import { PROPOSAL_STATUSES, type ProposalStatus } from '../../core/model.js';
import type { ConsoleContext } from '../context.js';
import { doneNotice } from '../notices.js';
import type { HistoryFilter } from '../ports.js';
import { queryField, refusal, viewerOf } from '../respond.js';
import { deciderOf } from '../sign-in.js';
import { proposalParams } from '../schemas.js';
import { historyPage, type HistoryQuery } from '../views/history.js';
import { pendingList, pendingPage } from '../views/proposal-card.js';
import { proposalPage } from '../views/proposal-page.js';

const HISTORY_LIMIT = 200;
const STATUSES: readonly ProposalStatus[] = PROPOSAL_STATUSES;

function historyQueryOf(request: FastifyRequest): HistoryQuery {
  return {
    status: queryField(request, 'status'),
    operation: queryField(request, 'operation'),
    agent: queryField(request, 'agent'),
    approver: queryField(request, 'approver'),
    from: queryField(request, 'from'),
    to: queryField(request, 'to'),
  };
}

/** The history form's values as a filter, or the problems that keep it from being one. */
function historyFilter(query: HistoryQuery, agents: { id: string; name: string }[]): { filter: HistoryFilter; problems: string[] } {
  const problems: string[] = [];
  const day = (text: string, name: string): Date | undefined => {
    if (!text) return undefined;
    const date = /^\d{4}-\d{2}-\d{2}$/.test(text) ? new Date(`${text}T00:00:00.000Z`) : new Date(Number.NaN);
    if (Number.isNaN(date.getTime())) problems.push(`“${name}” must be a date like 2026-11-22.`);
    return Number.isNaN(date.getTime()) ? undefined : date;
  };
  if (query.status && !STATUSES.includes(query.status as ProposalStatus)) problems.push(`Unknown status “${query.status}”.`);
  const agent = query.agent ? agents.find((a) => a.name === query.agent) : undefined;
  if (query.agent && !agent) problems.push(`No agent is named “${query.agent}”.`);
  const from = day(query.from, 'Created from');
  const toDay = day(query.to, 'Created to');
  const filter: HistoryFilter = {
    status: (query.status || undefined) as ProposalStatus | undefined,
    operation: query.operation || undefined,
    agentId: agent?.id,
    // "operator" means the console's web:operator; other identities are typed in full.
    approver: query.approver ? (query.approver.includes(':') ? query.approver : `web:${query.approver}`) : undefined,
    from,
    // "to" names a whole day: everything created before the next midnight.
    to: toDay ? new Date(toDay.getTime() + 86_400_000) : undefined,
    limit: HISTORY_LIMIT,
  };
  return { filter, problems };
}

/** The pages that only read: pending, history, one proposal. */
export const pageRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { services, queries, guard, items, send }) => {
  const routes = scope.withTypeProvider<ZodTypeProvider>();

  routes.get('/', { preHandler: guard.page }, async (request, reply) => {
    const session = guard.session(request);
    const viewer = viewerOf(session);
    const { items: pending, failed } = await items.pendingItems(deciderOf(session));
    return send(reply, 200, {
      title: 'Pending',
      viewer,
      section: 'pending',
      live: { kind: 'pending' },
      pendingCount: pending.length,
      notice: await doneNotice(services, request),
      body: pendingPage(pending, failed, viewer, services.clock()),
    });
  });

  routes.get('/fragments/pending', { preHandler: guard.fetch }, async (request, reply) => {
    const session = guard.session(request);
    const { items: pending, failed } = await items.pendingItems(deciderOf(session));
    return reply.type('text/html; charset=utf-8').send(pendingList(pending, failed, viewerOf(session), services.clock()).value);
  });

  routes.get('/history', { preHandler: guard.page }, async (request, reply) => {
    const session = guard.session(request);
    const query = historyQueryOf(request);
    const agents = await services.agents.list();
    const { filter, problems } = historyFilter(query, agents);
    const found = problems.length > 0 ? [] : await items.itemsFor(await queries.history(filter), deciderOf(session));
    const approvers = [...new Set(services.operations().flatMap((operation) => operation.approval.approvers))].sort();
    return send(reply, problems.length > 0 ? 400 : 200, {
      title: 'History',
      viewer: viewerOf(session),
      section: 'history',
      body: historyPage({
        query,
        operations: services.operations().map((operation) => operation.name),
        agents: agents.map((a) => a.name),
        approvers,
        items: found,
        limit: HISTORY_LIMIT,
        problem: problems.length > 0 ? problems.join(' ') : null,
      }),
    });
  });

  routes.get('/proposals/:id', { schema: { params: proposalParams }, preHandler: guard.page }, async (request, reply) => {
    const session = guard.session(request);
    const viewer = viewerOf(session);
    const { id } = request.params;
    const proposal = await services.store.getProposal(id);
    if (!proposal) {
      return send(
        reply,
        404,
        refusal(viewer, { title: 'Not found', heading: 'No such proposal', message: `There is no proposal ${id}.`, back: '/console/history' }),
      );
    }
    const [item] = await items.itemsFor([proposal], deciderOf(session));
    if (!item) throw new TwokeyError('internal', 'proposal view missing');
    const [events, chain] = await Promise.all([services.audit.list({ proposalId: proposal.id, limit: 1000 }), services.audit.verifyRecent()]);
    return send(reply, 200, {
      title: proposal.summary.slice(0, 80),
      viewer,
      section: 'none',
      live: { kind: 'proposal', id: proposal.id },
      notice: await doneNotice(services, request),
      body: proposalPage({ item, events, chain, viewer, now: services.clock(), commitMode: proposal.commitMode }),
    });
  });
};
