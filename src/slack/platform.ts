import * as z from 'zod';
import type { ChatPlatformDeclaration } from '../core/chat-platform.js';
import { grantChoice } from '../core/jobs.js';
import { urlString } from '../lib/url-string.js';

/**
 * Slack as the registry sees it (src/platforms/index.ts), without Bolt: its identities, its part of
 * an operation's config, its variables and its stored click. The integration is `index.ts`.
 */

/** A Slack user id (upper-case letters and digits, at most 32): `slack:U…` / `slack:W…`. */
export const SLACK_USER_ID = /^[UW][A-Z0-9]{1,31}$/;
/** A Slack user group: `slack:group:S…`. */
export const SLACK_GROUP_ID = /^S[A-Z0-9]{1,31}$/;

export const slackUserIdentity = (userId: string): string => `slack:${userId}`;
export const slackGroupIdentity = (groupId: string): string => `slack:group:${groupId}`;

/** The job kind of a stored Slack click: the name rows are stored under, never to change. */
export const SLACK_CLICK_JOB = 'slack.click';

const proposalId = z.string().min(1);
const clickBase = { proposalId, userId: z.string().min(1), receivedAt: z.string() };
/**
 * A click as it is stored before it is answered (src/outbox/inbox.ts): who, what, on which proposal,
 * and what the form said. Slack's `response_url` and `trigger_id` are not kept: the outcome is told
 * through the bot's own API, which works at any later time.
 */
export const slackClickSchema = z.discriminatedUnion('action', [
  z.object({ action: z.enum(['approve', 'retry']), ...clickBase, channel: z.string().nullable() }),
  z.object({ action: z.literal('reject'), ...clickBase, reason: z.string().nullable() }),
  z.object({ action: z.literal('grant'), ...clickBase, grant: grantChoice }),
]);

const approvalPart = z.strictObject({ channel: z.string().min(1, { error: 'expected a Slack channel id' }) });
const escalatePart = z.strictObject({ channel: z.string().min(1) });

const envSchema = z.object({
  SLACK_BOT_TOKEN: z.string().optional(),
  SLACK_SIGNING_SECRET: z.string().optional(),
  SLACK_APP_TOKEN: z.string().optional(),
  SLACK_API_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').default('https://slack.com/api/'),
});

/**
 * True when the environment asks for Slack: a bot token plus a signing secret (HTTP) or an app token
 * (Socket Mode). Kept free of Bolt: the runtime asks it before deciding to load the integration.
 */
export function isSlackConfigured(env: {
  readonly SLACK_BOT_TOKEN?: unknown;
  readonly SLACK_SIGNING_SECRET?: unknown;
  readonly SLACK_APP_TOKEN?: unknown;
}): boolean {
  return Boolean(env.SLACK_BOT_TOKEN && (env.SLACK_SIGNING_SECRET || env.SLACK_APP_TOKEN));
}

export const slackPlatform = {
  name: 'slack' as const,
  label: 'Slack',
  identityForms: [
    { kind: 'slack_user', prefix: 'slack:', pattern: SLACK_USER_ID, person: true, shown: 'slack:U…, slack:W…', example: 'slack:U0ALICE' },
    { kind: 'slack_group', prefix: 'slack:group:', pattern: SLACK_GROUP_ID, person: false, shown: 'slack:group:S…', example: 'slack:group:S0OPS' },
  ],
  approvalPart,
  escalatePart,
  describePart: (part: z.output<typeof approvalPart>) => `Slack channel ${part.channel}`,
  examples: { approval: { channel: 'C0APPROVALS' }, escalate: { channel: 'C0ESCALATE' } },
  env: {
    schema: envSchema,
    issues(vars) {
      if (vars.SLACK_APP_TOKEN !== undefined) {
        return vars.SLACK_BOT_TOKEN === undefined ? ['SLACK_BOT_TOKEN: required when SLACK_APP_TOKEN is set (Socket Mode)'] : [];
      }
      if (vars.SLACK_BOT_TOKEN !== undefined && vars.SLACK_SIGNING_SECRET === undefined) {
        return ['SLACK_SIGNING_SECRET: required when SLACK_BOT_TOKEN is set (or set SLACK_APP_TOKEN for Socket Mode)'];
      }
      if (vars.SLACK_SIGNING_SECRET !== undefined && vars.SLACK_BOT_TOKEN === undefined) return ['SLACK_BOT_TOKEN: required when SLACK_SIGNING_SECRET is set'];
      return [];
    },
    isConfigured: isSlackConfigured,
  },
  clickJobs: { [SLACK_CLICK_JOB]: slackClickSchema },
} satisfies ChatPlatformDeclaration<z.output<typeof approvalPart>, z.output<typeof escalatePart>>;

declare module '../core/chat-platform.js' {
  interface ChatPlatformParts {
    slack: { approval: z.output<typeof approvalPart>; escalate: z.output<typeof escalatePart> };
  }
  interface ChatPlatformJobs {
    'slack.click': typeof slackClickSchema;
  }
}
