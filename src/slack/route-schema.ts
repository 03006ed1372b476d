import { z } from 'zod';
import { apiSchemas } from '../http-kit/api-schemas.js';

/**
 * `POST /slack/events`, for the OpenAPI document only. Its signature covers the exact bytes Slack
 * sent, so the body stays a raw buffer (`z.unknown()` lets it through untouched) and every header is
 * optional: a missing signature must keep its answer from the signature check (401), not become a
 * schema error.
 */

const slackBody = z.unknown().register(apiSchemas, {
  description: "Slack's payload (`payload=…` form or JSON event), checked against `X-Slack-Signature` byte for byte before it is read",
});

export const slackEventsSchema = {
  tags: ['chat'],
  summary: "Slack's interactivity and events callback",
  description:
    'Answered by Bolt: `200` with its acknowledgement (a `url_verification` challenge is echoed), `401` with no body when the signature or its timestamp (±5 minutes) does not match, `400` with no body for a payload Slack never sends. A click that decides (Approve, Retry, a submitted form) is stored before the `200`; when it cannot be, the clicker is told privately that twokey cannot reach its database. Only with SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (HTTP mode).',
  consumes: ['application/x-www-form-urlencoded', 'application/json'],
  headers: z.looseObject({
    'x-slack-signature': z.string().optional().register(apiSchemas, { description: 'v0=HMAC-SHA256 of v0:timestamp:body with the signing secret' }),
    'x-slack-request-timestamp': z.string().optional().register(apiSchemas, { description: 'Unix seconds' }),
    'x-slack-retry-num': z.string().optional(),
    'x-slack-retry-reason': z.string().optional(),
  }),
  body: slackBody,
  response: { 200: z.unknown().register(apiSchemas, { description: "Bolt's acknowledgement, often empty" }) },
};
