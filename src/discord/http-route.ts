import type { KeyObject } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { discordInteractionsSchema } from './route-schema.js';
import { TwokeyError } from '../core/errors.js';
import type { Clock } from '../core/model.js';
import type { InteractionHandler } from './interactions.js';
import { checkDiscordSignature } from './signature.js';

export interface InteractionRouteOptions {
  publicKey: KeyObject;
  clock: Clock;
  handler: InteractionHandler;
}

const headerValue = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? undefined : value);

/**
 * `POST /discord/interactions`. The signature covers the exact bytes Discord sent, so this route
 * lives in its own plugin scope whose only body parser keeps the raw buffer; the rest of the API
 * keeps fastify's JSON parser.
 */
export async function registerInteractionRoute(app: FastifyInstance, options: InteractionRouteOptions): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

    // Zod only to document the route: headers all optional, the body let through as raw bytes.
    scope.setValidatorCompiler(validatorCompiler);
    scope.setSerializerCompiler(serializerCompiler);
    scope.post('/discord/interactions', { schema: discordInteractionsSchema }, async (request, reply) => {
      const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const check = await checkDiscordSignature(
        options.publicKey,
        {
          signature: headerValue(request.headers['x-signature-ed25519']),
          timestamp: headerValue(request.headers['x-signature-timestamp']),
          rawBody,
        },
        options.clock(),
      );
      if (check !== 'ok') {
        // Discord's portal sends bad signatures on purpose and stops using an endpoint that accepts one.
        request.log.info({ check }, 'Discord interaction refused: signature check failed');
        // Nothing but the status, as for Slack: a prober learns no more than "no".
        return reply.code(401).send();
      }
      let payload: unknown;
      try {
        payload = JSON.parse(rawBody.toString('utf8'));
      } catch {
        throw new TwokeyError('invalid_json', 'the request body is not valid JSON');
      }
      const answer = await options.handler.handle(payload);
      if (!answer) throw new TwokeyError('invalid_request', 'not a Discord interaction');
      await reply.header('content-type', 'application/json').send(answer.response);
      // Only now: the click, stored already, is acknowledged within Discord's 3 seconds whatever the decision costs.
      options.handler.afterAnswer(answer);
      return reply;
    });
  });
}
