import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { explainDecisionError, type DecisionAction } from '../../core/decision-preview.js';
import { TwokeyError, isTwokeyError, type ErrorCode } from '../../core/errors.js';
import { requiresPasskey } from '../../core/step-up.js';
import type { ConsoleContext } from '../context.js';
import { grantRequestFrom } from '../grant-form.js';
import { field, refusal, safeReturn, viewerOf, withParams } from '../respond.js';
import { assertionFrom, relyingPartyOf } from '../passkey-step.js';
import { grantForm, passkeyForm, proposalParams, rejectForm, sessionForm, type SessionForm } from '../schemas.js';
import { deciderOf, type ConsoleSession } from '../sign-in.js';

const REFUSAL_TITLES: Partial<Record<ErrorCode, string>> = {
  not_an_approver: 'You cannot decide on this proposal',
  owner_cannot_approve: 'You cannot decide on this proposal',
  not_pending: 'This proposal is no longer pending',
  nothing_to_retry: 'There is nothing to retry',
  expired: 'This proposal has expired',
  not_found: 'Not found',
  operation_removed: 'This operation is no longer configured',
  execution_failed: 'The execution failed',
  step_up_required: 'This approval needs your passkey',
  step_up_failed: 'The passkey check failed',
};

/** Approve, approve for a while (a grant), reject and retry: each a CSRF-guarded form that calls the core. */
export const decisionRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { services, guard, send, publicOrigin }) => {
  const routes = scope.withTypeProvider<ZodTypeProvider>();

  /**
   * Runs a decision; a refusal by the core becomes a page with its HTTP status and a way back. `run`
   * returns the `done` notice to redirect to, and any extra query parameters it needs.
   */
  async function decide(
    request: FastifyRequest & { params: { id: string }; body: SessionForm },
    reply: FastifyReply,
    action: DecisionAction,
    run: (id: string, session: ConsoleSession) => Promise<string | { done: string; extra: Record<string, string> }>,
  ) {
    const session = guard.session(request);
    const { id } = request.params;
    const back = safeReturn(field(request.body, 'return'));
    try {
      const outcome = await run(id, session);
      const { done, extra } = typeof outcome === 'string' ? { done: outcome, extra: {} } : outcome;
      return await reply.redirect(withParams(back, { done, id, ...extra }), 303);
    } catch (error) {
      if (!isTwokeyError(error) || error.status >= 500) {
        if (isTwokeyError(error) && error.code === 'execution_failed') {
          return await reply.redirect(withParams(back, { done: 'retry', id }), 303);
        }
        throw error;
      }
      return send(
        reply,
        error.status,
        refusal(viewerOf(session), {
          heading: REFUSAL_TITLES[error.code] ?? 'Not done',
          message: explainDecisionError(error, action),
          back: `/console/proposals/${encodeURIComponent(id)}`,
        }),
      );
    }
  }

  routes.post('/proposals/:id/approve', { schema: { params: proposalParams, body: passkeyForm }, preHandler: guard.form }, (request, reply) =>
    decide(request, reply, 'approve', async (id, session) => {
      // A `stepUp: passkey` operation: the form carries an assertion made for this proposal, verified here.
      const proposal = await services.store.getProposal(id);
      const operation = proposal ? services.operation(proposal.operation) : undefined;
      const stepUp =
        proposal && operation && requiresPasskey(operation, proposal)
          ? await services.passkeys.verifyApproval(session.approver, proposal, relyingPartyOf(request, publicOrigin), assertionFrom(request.body))
          : undefined;
      const { outcome } = await services.proposals.approve(id, { ...deciderOf(session), ...(stepUp ? { stepUp } : {}) });
      return outcome === 'already_counted' ? 'already' : 'approve';
    }),
  );

  // "Approve for…": this approval, and a grant for the same operation of the same agent, through the
  // core function Slack's modal and `twokey proposals approve --grant` use.
  routes.post('/proposals/:id/approve-for', { schema: { params: proposalParams, body: grantForm }, preHandler: guard.form }, (request, reply) =>
    decide(request, reply, 'approve', async (id, session) => {
      const proposal = await services.store.getProposal(id);
      if (!proposal) throw new TwokeyError('not_found', `There is no proposal ${id}.`);
      const grants = services.operation(proposal.operation)?.grants;
      if (!grants?.allow) throw new TwokeyError('invalid_request', `The operation “${proposal.operation}” does not allow approving for a while.`);
      const { grant } = await services.grants.approveAndGrant(id, deciderOf(session), grantRequestFrom(request.body, grants));
      request.log.info({ proposalId: id, approver: session.approver, grantId: grant.id }, 'console approval with a grant');
      return { done: 'grant', extra: { grant: grant.id } };
    }),
  );

  routes.post('/proposals/:id/reject', { schema: { params: proposalParams, body: rejectForm }, preHandler: guard.form }, (request, reply) =>
    decide(request, reply, 'reject', async (id, session) => {
      await services.proposals.reject(id, deciderOf(session), field(request.body, 'reason') ?? null);
      return 'reject';
    }),
  );

  routes.post('/proposals/:id/retry', { schema: { params: proposalParams, body: sessionForm }, preHandler: guard.form }, (request, reply) =>
    decide(request, reply, 'retry', async (id, session) => {
      await services.proposals.retry(id, deciderOf(session));
      return 'retry';
    }),
  );
};
