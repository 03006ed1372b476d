import * as z from 'zod';
import type { ChatPlatformDeclaration } from '../core/chat-platform.js';
import { grantChoice } from '../core/jobs.js';
import { urlString } from '../lib/url-string.js';

/**
 * Microsoft Teams as the registry sees it (src/platforms/index.ts): its identities, its part of an
 * operation's config, its variables and its stored click. The integration is `index.ts`.
 */

/** An Entra (Azure AD) id: app, tenant and object ids are GUIDs. */
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** A person's Entra object id as an identity: lower case, as Teams sends `aadObjectId`. */
export const ENTRA_OBJECT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A Teams user's identity, or null when the object id is not a GUID. */
export function teamsUserIdentity(aadObjectId: string): string | null {
  const id = aadObjectId.toLowerCase();
  return ENTRA_OBJECT_ID.test(id) ? `teams:${id}` : null;
}

/** The job kind of a stored Teams click: the name rows are stored under, never to change. */
export const TEAMS_CLICK_JOB = 'teams.click';

const clickBase = {
  proposalId: z.string().min(1),
  decider: z.object({ identity: z.string(), via: z.literal('teams') }),
  activityId: z.string(),
  receivedAt: z.string(),
};
/**
 * A Teams card action (Action.Execute) as it is stored before the invoke is answered: who (the
 * Entra object id Teams vouched for in the signed activity), what, and the card's inputs. Nothing
 * of the activity is kept: its outcome goes back in the invoke's own response, or shows on the card.
 */
export const teamsClickSchema = z.discriminatedUnion('action', [
  z.object({ action: z.enum(['approve', 'retry']), ...clickBase }),
  z.object({ action: z.literal('reject'), ...clickBase, reason: z.string().nullable() }),
  z.object({ action: z.literal('grant'), ...clickBase, grant: grantChoice }),
]);

/**
 * Where a Teams card goes: a conversation id as Teams shows it (`19:…@thread.tacv2`, `a:…`). Held as
 * the `channel` the publishers are handed, so the rest of twokey reads it like any other platform's.
 */
type ConversationPart = { conversation: string; channel?: string };
const conversation = z
  .strictObject({
    conversation: z
      .string({ error: 'expected a Teams conversation id, e.g. "19:abc…@thread.tacv2"' })
      .min(1)
      .max(512)
      .regex(/^[\x21-\x7E]+$/, { error: 'expected a Teams conversation id (no spaces), e.g. "19:abc…@thread.tacv2"' }),
  })
  .transform((part) => ({ conversation: part.conversation, channel: part.conversation }));

const envSchema = z.object({
  TEAMS_APP_ID: z.string().regex(GUID, { error: "expected the Azure bot's app id (a GUID)" }).optional(),
  TEAMS_APP_PASSWORD: z.string().optional(),
  TEAMS_TENANT_ID: z.string().regex(GUID, { error: 'expected an Entra tenant id (a GUID)' }).optional(),
  TEAMS_SERVICE_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').default('https://smba.trafficmanager.net/teams/'),
  TEAMS_TOKEN_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').optional(),
  TEAMS_OPENID_METADATA_URL: urlString(['http:', 'https:'], 'expected an http:// or https:// URL').default(
    'https://login.botframework.com/v1/.well-known/openidconfiguration',
  ),
});

export const teamsPlatform = {
  name: 'teams' as const,
  label: 'Teams',
  identityForms: [
    {
      kind: 'teams_user',
      prefix: 'teams:',
      pattern: ENTRA_OBJECT_ID,
      person: true,
      shown: 'teams:<object id>',
      example: 'teams:5f0c3a2e-8d4b-4c1a-9e7f-2b6d8a0c4e13',
    },
  ],
  approvalPart: conversation,
  escalatePart: conversation,
  describePart: (part: ConversationPart) => `Teams conversation ${part.conversation}`,
  examples: { approval: { conversation: '19:a1b2c3d4e5f60718293a4b5c6d7e8f90@thread.tacv2' }, escalate: { conversation: '19:0f0e0d0c0b0a0908@thread.tacv2' } },
  env: {
    schema: envSchema,
    issues(vars) {
      if ((vars.TEAMS_APP_ID === undefined) === (vars.TEAMS_APP_PASSWORD === undefined)) return [];
      return [
        vars.TEAMS_APP_ID === undefined ? 'TEAMS_APP_ID: required when TEAMS_APP_PASSWORD is set' : 'TEAMS_APP_PASSWORD: required when TEAMS_APP_ID is set',
      ];
    },
    isConfigured: (env) => Boolean(env.TEAMS_APP_ID && env.TEAMS_APP_PASSWORD),
  },
  clickJobs: { [TEAMS_CLICK_JOB]: teamsClickSchema },
} satisfies ChatPlatformDeclaration<ConversationPart, ConversationPart>;

declare module '../core/chat-platform.js' {
  interface ChatPlatformParts {
    teams: { approval: z.output<typeof conversation>; escalate: z.output<typeof conversation> };
  }
  interface ChatPlatformJobs {
    'teams.click': typeof teamsClickSchema;
  }
}
