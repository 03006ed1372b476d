import type { FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { apiSchemas, errorBodySchema } from '../http-kit/api-schemas.js';
import { TwokeyError } from '../core/errors.js';
import { claimedServiceUrl } from './activity.js';
import type { TeamsAuth } from './auth.js';
import type { InvokeHandler } from './invoke.js';

/** Where the Azure bot's messaging endpoint points: `https://<twokey>/teams/messages`. */
export const TEAMS_MESSAGES_PATH = '/teams/messages';

const teamsMessagesSchema = {
  tags: ['chat'],
  summary: "Microsoft Teams' messaging endpoint (Bot Framework activities)",
  description:
    "Activities from the Bot Framework channel. Each carries a JWT (`Authorization: Bearer`, RS256) that must be signed by a key of the channel's OpenID metadata (TEAMS_OPENID_METADATA_URL), issued by its issuer, for TEAMS_APP_ID, with a `serviceUrl` claim equal to the activity's; otherwise `401` with no body and nothing is read. An approval card's button (`invoke` named `adaptiveCard/action`) is stored before its invoke response, which tells the clicker the outcome, a refusal, or that twokey cannot reach its database. Other activities are acknowledged with an empty `200`. Only with TEAMS_APP_ID and TEAMS_APP_PASSWORD.",
  consumes: ['application/json'],
  headers: z.looseObject({
    authorization: z.string().optional().register(apiSchemas, { description: 'Bearer JWT from the Bot Framework channel' }),
  }),
  body: z.unknown().register(apiSchemas, { description: 'A Bot Framework activity, read only once its token checks out' }),
  response: {
    200: z.unknown().register(apiSchemas, { description: 'An invoke response (statusCode, type, value), or empty' }),
    '4xx': errorBodySchema,
  },
};

export interface TeamsRouteOptions {
  auth: TeamsAuth;
  handler: InvokeHandler;
}

/**
 * `POST /teams/messages`, in its own plugin scope: the body is parsed here, after the token is
 * checked, so an unauthenticated request costs a header read and a signature check only.
 */
export async function registerTeamsRoute(app: FastifyInstance, options: TeamsRouteOptions): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
    scope.setValidatorCompiler(validatorCompiler);
    scope.setSerializerCompiler(serializerCompiler);
    scope.post(TEAMS_MESSAGES_PATH, { schema: teamsMessagesSchema }, async (request, reply) => {
      const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      let payload: unknown;
      try {
        payload = JSON.parse(rawBody.toString('utf8'));
      } catch {
        payload = undefined;
      }
      const authorization = Array.isArray(request.headers.authorization) ? undefined : request.headers.authorization;
      // The token is checked first, against the serviceUrl the body claims: an unauthenticated body is never acted on.
      const check = await options.auth.check(authorization, payload === undefined ? null : (claimedServiceUrl(payload) ?? ''));
      if (!check.ok) {
        request.log.info({ problem: check.problem }, 'Teams activity refused: token check failed');
        return reply.code(401).send();
      }
      if (payload === undefined) throw new TwokeyError('invalid_json', 'the request body is not valid JSON');
      const answer = await options.handler.handle(payload);
      if (answer.body === null) return reply.code(answer.status).send();
      return reply.code(answer.status).header('content-type', 'application/json').send(answer.body);
    });
  });
}
