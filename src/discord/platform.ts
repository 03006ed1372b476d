import * as z from 'zod';
import type { ChatPlatformDeclaration } from '../core/chat-platform.js';
import { grantChoice } from '../core/jobs.js';
import { urlString } from '../lib/url-string.js';

/**
 * Discord as the registry sees it (src/platforms/index.ts), without discord.js: its identities, its
 * part of an operation's config, its variables and its stored click. The integration is `index.ts`.
 */

/**
 * A Discord snowflake is 17 to 20 digits. Ids of 15–16 digits only existed in 2015 and are refused
 * everywhere, so an id that could never click a button can never be an owner either.
 */
export const DISCORD_SNOWFLAKE = /^\d{17,20}$/;

export const discordUserIdentity = (userId: string): string => `discord:user:${userId}`;
export const discordRoleIdentity = (roleId: string): string => `discord:role:${roleId}`;

/** The job kind of a stored Discord click: the name rows are stored under, never to change. */
export const DISCORD_CLICK_JOB = 'discord.click';

/** A value sealed with AES-256-GCM (src/idempotency/seal.ts): the interaction token of a stored click. */
const sealed = z.object({ v: z.literal(1), iv: z.string(), tag: z.string(), data: z.string() });
const clickBase = {
  proposalId: z.string().min(1),
  decider: z.object({ identity: z.string(), memberOf: z.array(z.string()).optional(), via: z.string() }),
  interaction: z.object({ id: z.string(), applicationId: z.string(), token: sealed }),
  receivedAt: z.string(),
};
/**
 * A click as it is stored before it is answered (src/outbox/inbox.ts): who (with their roles), what,
 * on which proposal, what the form said; the interaction token only sealed (src/discord/clicks.ts).
 */
export const discordClickSchema = z.discriminatedUnion('action', [
  z.object({ action: z.enum(['approve', 'retry']), ...clickBase }),
  z.object({ action: z.literal('reject'), ...clickBase, reason: z.string().nullable() }),
  z.object({ action: z.literal('grant'), ...clickBase, grant: grantChoice }),
]);

const approvalPart = z.strictObject({
  // YAML reads an unquoted 18-digit id as a number and rounds it, hence the hint.
  channel: z.string({ error: 'expected a string: quote Discord ids, e.g. "223456789012345678"' }).regex(DISCORD_SNOWFLAKE, {
    error: 'expected a Discord channel id (17 to 20 digits)',
  }),
});
const escalatePart = z.strictObject({ channel: z.string().regex(DISCORD_SNOWFLAKE, { error: 'expected a Discord channel id (17 to 20 digits)' }) });

const envSchema = z.object({
  DISCORD_BOT_TOKEN: z.string().optional(),
  DISCORD_APPLICATION_ID: z.string().regex(DISCORD_SNOWFLAKE, { error: 'expected a Discord id (17 to 20 digits)' }).optional(),
  DISCORD_PUBLIC_KEY: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, { error: 'expected 64 hexadecimal characters' })
    .optional(),
  DISCORD_GATEWAY: z
    .enum(['true', 'false'], { error: 'expected "true" or "false"' })
    .default('false')
    .transform((v) => v === 'true'),
  DISCORD_API_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').default('https://discord.com/api'),
});

export const discordPlatform = {
  name: 'discord' as const,
  label: 'Discord',
  identityForms: [
    {
      kind: 'discord_user',
      prefix: 'discord:user:',
      pattern: DISCORD_SNOWFLAKE,
      person: true,
      shown: 'discord:user:<id>',
      example: 'discord:user:223456789012345678',
    },
    {
      kind: 'discord_role',
      prefix: 'discord:role:',
      pattern: DISCORD_SNOWFLAKE,
      person: false,
      shown: 'discord:role:<id>',
      example: 'discord:role:223456789012345679',
    },
  ],
  approvalPart,
  escalatePart,
  describePart: (part: z.output<typeof approvalPart>) => `Discord channel ${part.channel}`,
  examples: { approval: { channel: '223456789012345670' }, escalate: { channel: '223456789012345671' } },
  env: {
    schema: envSchema,
    issues(vars) {
      const issues: string[] = [];
      if (vars.DISCORD_GATEWAY === 'true' && vars.DISCORD_BOT_TOKEN === undefined) issues.push('DISCORD_BOT_TOKEN: required when DISCORD_GATEWAY is true');
      // Clicks would be verified but their messages could never be posted or edited.
      if (vars.DISCORD_PUBLIC_KEY !== undefined && vars.DISCORD_BOT_TOKEN === undefined)
        issues.push('DISCORD_BOT_TOKEN: required when DISCORD_PUBLIC_KEY is set');
      return issues;
    },
    isConfigured: (env) => Boolean(env.DISCORD_BOT_TOKEN),
  },
  clickJobs: { [DISCORD_CLICK_JOB]: discordClickSchema },
} satisfies ChatPlatformDeclaration<z.output<typeof approvalPart>, z.output<typeof escalatePart>>;

declare module '../core/chat-platform.js' {
  interface ChatPlatformParts {
    discord: { approval: z.output<typeof approvalPart>; escalate: z.output<typeof escalatePart> };
  }
  interface ChatPlatformJobs {
    'discord.click': typeof discordClickSchema;
  }
}
