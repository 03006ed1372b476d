import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { isTwokeyError } from '../../core/errors.js';
import { requiresPasskey } from '../../core/step-up.js';
import type { ConsoleContext } from '../context.js';
import { doneNotice } from '../notices.js';
import { attestationFrom, relyingPartyOf } from '../passkey-step.js';
import { refusal, viewerOf, withParams } from '../respond.js';
import { passkeyForm, passkeyParams, proposalParams, sessionForm } from '../schemas.js';
import { passkeysPage } from '../views/passkeys.js';

/**
 * The signed-in person's passkeys (register, list, revoke) and the WebAuthn options a passkey step
 * starts from. Options are answered as JSON to passkeys.js; every other answer is a page.
 */
export const passkeyRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { services, guard, send, publicOrigin }) => {
  const routes = scope.withTypeProvider<ZodTypeProvider>();
  const { passkeys } = services;

  /** A refusal to passkeys.js: its message is shown beside the button. */
  const jsonRefusal = (reply: FastifyReply, error: unknown) => {
    if (!isTwokeyError(error) || error.status >= 500) throw error;
    return reply.code(error.status).send({ error: error.message, code: error.code });
  };

  routes.get('/passkeys', { preHandler: guard.page }, async (request, reply) => {
    const session = guard.session(request);
    return send(reply, 200, {
      title: 'Passkeys',
      viewer: viewerOf(session),
      section: 'passkeys',
      notice: await doneNotice(services, request),
      body: passkeysPage(await passkeys.list(session.approver), viewerOf(session)),
    });
  });

  routes.post('/passkeys/options', { schema: { body: sessionForm }, preHandler: guard.form }, async (request, reply) => {
    const session = guard.session(request);
    return reply.send(await passkeys.registrationOptions(session.approver, relyingPartyOf(request, publicOrigin)));
  });

  routes.post('/passkeys', { schema: { body: passkeyForm }, preHandler: guard.form }, async (request, reply) => {
    const session = guard.session(request);
    try {
      const added = await passkeys.register(session.approver, relyingPartyOf(request, publicOrigin), attestationFrom(request.body));
      request.log.info({ approver: session.approver, credentialId: added.credentialId }, 'console passkey registered');
    } catch (error) {
      if (!isTwokeyError(error) || error.status >= 500) throw error;
      const message = `${error.message} Nothing was changed.`;
      return send(reply, error.status, refusal(viewerOf(session), { heading: 'The passkey was not added', message, back: '/console/passkeys' }));
    }
    return reply.redirect(withParams('/console/passkeys', { done: 'passkey-registered' }), 303);
  });

  routes.post('/passkeys/:id/revoke', { schema: { params: passkeyParams, body: sessionForm }, preHandler: guard.form }, async (request, reply) => {
    const session = guard.session(request);
    try {
      await passkeys.revoke(session.approver, request.params.id);
    } catch (error) {
      if (!isTwokeyError(error) || error.status >= 500) throw error;
      const message = `${error.message} Nothing was changed.`;
      return send(reply, error.status, refusal(viewerOf(session), { heading: 'No such passkey', message, back: '/console/passkeys' }));
    }
    request.log.info({ approver: session.approver, credentialId: request.params.id }, 'console passkey revoked');
    return reply.redirect(withParams('/console/passkeys', { done: 'passkey-revoked' }), 303);
  });

  // The options to approve one proposal: the challenge is bound to its binding hash (src/core/step-up.ts).
  routes.post('/proposals/:id/passkey-options', { schema: { params: proposalParams, body: sessionForm }, preHandler: guard.form }, async (request, reply) => {
    const session = guard.session(request);
    const proposal = await services.store.getProposal(request.params.id);
    if (!proposal) return reply.code(404).send({ error: `There is no proposal ${request.params.id}.`, code: 'not_found' });
    const operation = services.operation(proposal.operation);
    if (!operation || !requiresPasskey(operation, proposal)) {
      return reply
        .code(400)
        .send({ error: 'This proposal’s operation does not ask for a passkey: approve it with the plain button.', code: 'invalid_request' });
    }
    if (proposal.status !== 'pending') return reply.code(409).send({ error: 'This proposal is no longer pending.', code: 'not_pending' });
    try {
      return reply.send(await passkeys.approvalOptions(session.approver, proposal, relyingPartyOf(request, publicOrigin)));
    } catch (error) {
      return jsonRefusal(reply, error);
    }
  });
};
