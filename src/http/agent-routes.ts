import type { FastifyInstance, FastifyReply } from 'fastify';
import { snapshotOf } from '../core/changes.js';
import { TwokeyError } from '../core/errors.js';
import { outcomeOf } from '../core/outcome.js';
import type { AgentProposalView } from '../core/proposals.js';
import { finalStatuses, type AgentRecord } from '../core/model.js';
import type { FailedAuthLimiter, LongPollLimiter } from '../limits/index.js';
import { tokenSealer } from '../idempotency/seal.js';
import { agentOf, asAgentScope, bearerKey, perAgentRateLimit } from '../http-kit/agent-auth.js';
import { errorBodySchema } from '../http-kit/api-schemas.js';
import type { AgentApiServices } from './ports.js';
import {
  commitAnswerSchema,
  commitBodySchema,
  commitHeadersSchema,
  idempotentHeadersSchema,
  operationListSchema,
  proposalCreatedSchema,
  proposalIdParamsSchema,
  proposalQuerySchema,
  proposalReusedSchema,
  proposalViewSchema,
  proposeBodySchema,
  type ProposalView,
} from './schemas.js';

export interface AgentRouteDeps extends AgentApiServices {
  rateLimit: { max: number; timeWindowMs: number };
  longPollIntervalMs: number;
  longPolls?: LongPollLimiter;
  failedAuth: FailedAuthLimiter;
}

const MAX_WAIT_SECONDS = 60;

const agentKey = [{ agentKey: [] }];
const errors = { '4xx': errorBodySchema, '5xx': errorBodySchema };

/** The core's view, in the schema's words: a decision is only shown once both who and when are known. */
function toProposalView(view: AgentProposalView): ProposalView {
  const { decision, ...rest } = view;
  return { ...rest, decision: decision?.by && decision.at ? { by: decision.by, at: decision.at, reason: decision.reason } : null };
}

// Reasons a long-poll's wait ends early. Given, so that ending every long-poll does not build an
// AbortError (a DOMException with its stack) that nobody reads.
const ANSWERED = 'answered';
const CLIENT_GONE = 'the client went away';

/** What a client saw of a proposal: the `seen` of a long-poll. */
const shownAs = (view: AgentProposalView) => `${view.status}:${view.approvals.length}`;

/**
 * The proposal once it differs from what the client saw, or after `wait` seconds. Without `seen`, what
 * it saw is taken to be the first read here; an approved `commit: agent` proposal then answers at once,
 * since only its agent can move it on and the agent's own earlier read may have raced the approval.
 */
async function longPoll(
  deps: AgentRouteDeps,
  agent: AgentRecord,
  id: string,
  options: { wait: number; seen: string | undefined; reply: FastifyReply },
): Promise<AgentProposalView> {
  if (!options.wait) return deps.proposals.viewForAgent(agent, id);
  const aborted = new AbortController();
  const deadline = Date.now() + options.wait * 1000;
  // The feed wakes us at once for changes made here (and, on PostgreSQL, on any replica); the
  // interval is the fallback that also covers the embedded database, which has no cross-process
  // notifications.
  const nextChange = () => deps.changes.next(id, Math.min(deps.longPollIntervalMs, Math.max(0, deadline - Date.now())), aborted.signal);
  // Subscribed before the first read, so a change committed between the two is not missed, and the
  // wait needs no second read.
  let changed = nextChange();
  let leave: (() => void) | null | undefined;
  try {
    const first = await deps.proposals.viewForAgent(agent, id);
    const differs = options.seen === undefined ? awaitsItsAgent(deps, first) : shownAs(first) !== options.seen;
    if (finalStatuses.includes(first.status) || differs) return first;
    leave = deps.longPolls?.enter(agent.id);
    if (leave === null) throw deps.longPolls?.refusal();
    // The response's 'close' (not the request's, which fires once the request has been read,
    // usually before this handler runs) tells that the client went away mid-wait.
    options.reply.raw.once('close', () => aborted.abort(CLIENT_GONE));
    const fingerprint = (view: AgentProposalView) => `${shownAs(view)}/${view.error ?? ''}`;
    for (;;) {
      // A change committed here comes with the proposal as it left it: then nothing is read again.
      const published = snapshotOf(await changed);
      // Subscribe before re-reading, so a change between the two is not missed.
      changed = nextChange();
      const latest = await deps.proposals.viewForAgent(agent, id, published);
      if (fingerprint(latest) !== fingerprint(first) || Date.now() >= deadline || aborted.signal.aborted) return latest;
    }
  } finally {
    // Ends the subscription made for the next turn, so it holds no listener or timer once answered.
    aborted.abort(ANSWERED);
    leave?.();
  }
}

function awaitsItsAgent(deps: AgentRouteDeps, view: AgentProposalView): boolean {
  return view.status === 'approved' && deps.operations().find((operation) => operation.name === view.operation)?.commit === 'agent';
}

export function registerAgentRoutes(app: FastifyInstance, deps: AgentRouteDeps): void {
  app.register(async (scope) => {
    const v1 = asAgentScope(scope, deps);

    const limited = perAgentRateLimit(deps.rateLimit);

    v1.get(
      '/v1/operations',
      {
        config: limited,
        schema: {
          tags: ['agent API'],
          summary: 'The operations this agent may propose',
          security: agentKey,
          response: { 200: operationListSchema, ...errors },
        },
      },
      async (request) => {
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
      },
    );

    v1.post(
      '/v1/proposals',
      {
        config: limited,
        schema: {
          tags: ['agent API'],
          summary: 'Propose an operation',
          description:
            'twokey writes the summary, mints a single-use confirmation token bound to this agent, the operation and the canonical params, and asks the approvers. With `reuse: true`, a request with the same identity (agent, operation, canonical params, conversation) that still answers is returned with 200 instead.',
          security: agentKey,
          headers: idempotentHeadersSchema,
          body: proposeBodySchema,
          response: { 200: proposalReusedSchema, 201: proposalCreatedSchema, ...errors },
        },
      },
      async (request, reply) => {
        const { operation, params, callbackUrl, reuse, conversation } = request.body;
        const agent = agentOf(request);
        const input = { operation, params, ...(callbackUrl === undefined ? {} : { callbackUrl }) };
        if (conversation !== undefined && reuse !== true) {
          throw new TwokeyError('invalid_request', '`conversation` names the request identity `reuse` looks up; send it with `"reuse": true`', [
            { path: '/conversation', message: 'only with "reuse": true' },
          ]);
        }
        const made = reuse
          ? await deps.requests.proposeOnce(agent, input, { conversation: conversation ?? null, sealer: tokenSealer(bearerKey(request)) })
          : { created: true as const, ...(await deps.proposals.propose(agent, input)) };
        if (!made.created) {
          const view = toProposalView(await deps.proposals.viewForAgent(agent, made.proposalId));
          return reply.status(200).send({ ...view, confirmToken: made.confirmToken, reused: true as const });
        }
        const { proposal, confirmToken } = made;
        return reply.status(201).send({
          id: proposal.id,
          status: proposal.status,
          operation: proposal.operation,
          summary: proposal.summary,
          expiresAt: proposal.expiresAt.toISOString(),
          confirmToken,
          quorum: proposal.quorum,
          approvals: [],
          outcome: outcomeOf(proposal, []),
        });
      },
    );

    v1.get(
      '/v1/proposals/:id',
      {
        config: limited,
        schema: {
          tags: ['agent API'],
          summary: 'A proposal, without its token',
          description: "With `wait`, long-polls until the proposal changes. Another agent's proposal is 404.",
          security: agentKey,
          params: proposalIdParamsSchema,
          querystring: proposalQuerySchema,
          response: { 200: proposalViewSchema, ...errors },
        },
      },
      async (request, reply) => {
        const wait = Math.min(MAX_WAIT_SECONDS, Number(request.query.wait ?? 0));
        return toProposalView(await longPoll(deps, agentOf(request), request.params.id, { wait, seen: request.query.seen, reply }));
      },
    );

    v1.post(
      '/v1/proposals/:id/commit',
      {
        config: limited,
        schema: {
          tags: ['agent API'],
          summary: 'Commit an approved `commit: agent` proposal',
          description:
            'Checks, in order: invalid_token, principal_mismatch, consumed, expired, operation_mismatch, params_mismatch, rejected / not_approved. 502 execution_failed leaves the token valid: retry. A commit that already happened, asked again by the same agent with the same token, operation and params, answers 200 with its stored result, `replayed: true` and `Idempotent-Replayed: true`; any other use of a consumed token is `consumed`.',
          security: agentKey,
          headers: commitHeadersSchema,
          params: proposalIdParamsSchema,
          body: commitBodySchema,
          response: { 200: commitAnswerSchema, ...errors },
        },
      },
      async (request, reply) => {
        const token = request.headers['x-confirmation-token'];
        if (typeof token !== 'string' || token.length === 0) {
          throw new TwokeyError('invalid_token', 'missing X-Confirmation-Token header');
        }
        const { id } = request.params;
        const agent = agentOf(request);
        // The answer comes from what the commit's transactions returned: no read after them.
        const { proposal, approvals, replayed } = await deps.proposals.commitWithApprovals(agent, id, token, request.body);
        const answer = { status: proposal.status, result: proposal.result ?? null, outcome: outcomeOf(proposal, approvals) };
        if (!replayed) return answer;
        // The same header as an Idempotency-Key replay: this answer repeats one already given.
        reply.header('idempotent-replayed', 'true');
        return { ...answer, replayed: true as const };
      },
    );

    v1.post(
      '/v1/proposals/:id/cancel',
      {
        config: limited,
        schema: {
          tags: ['agent API'],
          summary: 'Withdraw a pending proposal',
          security: agentKey,
          headers: idempotentHeadersSchema,
          params: proposalIdParamsSchema,
          response: { 200: proposalViewSchema, ...errors },
        },
      },
      async (request) => {
        const agent = agentOf(request);
        const { id } = request.params;
        await deps.proposals.cancel(agent, id);
        return toProposalView(await deps.proposals.viewForAgent(agent, id));
      },
    );
  });
}
