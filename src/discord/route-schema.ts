import { z } from 'zod';
import { apiSchemas, errorBodySchema } from '../http-kit/api-schemas.js';

/**
 * `POST /discord/interactions`, for the OpenAPI document only. Its signature covers the exact bytes
 * Discord sent, so the body stays a raw buffer (`z.unknown()` lets it through untouched) and every
 * header is optional: a missing signature must keep its answer from the signature check (401), not
 * become a schema error.
 */

export const discordInteractionsSchema = {
  tags: ['chat'],
  summary: "Discord's interactions endpoint",
  description:
    'Button clicks and pings from Discord, verified with Ed25519 against DISCORD_PUBLIC_KEY before they are read; a bad signature is `401 unauthorized` (Discord probes with bad ones on purpose). A click that decides is stored before its response; when it cannot be, the response is an ephemeral message saying twokey cannot reach its database. Only with DISCORD_PUBLIC_KEY.',
  consumes: ['application/json'],
  headers: z.looseObject({
    'x-signature-ed25519': z.string().optional().register(apiSchemas, { description: 'Hex Ed25519 signature of timestamp + body' }),
    'x-signature-timestamp': z.string().optional(),
  }),
  body: z.unknown().register(apiSchemas, { description: 'A Discord interaction, checked against its signature byte for byte before it is read' }),
  response: {
    200: z.unknown().register(apiSchemas, { description: 'The interaction response (pong, deferred update, ephemeral message)' }),
    '4xx': errorBodySchema,
  },
};
