/**
 * The one grammar of identities. Config (approvers, owners, people), the CLI's `--as` and
 * `--owner`, the console's sign-in names and the chat transports all parse and build identities
 * here, so an identity accepted in one place is never refused (or silently useless) in another.
 *
 * - `slack:U…` / `slack:W…`: a Slack user id (upper-case letters and digits, at most 32).
 * - `slack:group:S…`: a Slack user group.
 * - `discord:user:<snowflake>` / `discord:role:<snowflake>`: a Discord snowflake is 17 to 20
 *   digits. Ids of 15–16 digits only existed in 2015 and are refused everywhere, so an id that
 *   could never click a button can never be an owner either.
 * - `teams:<object id>`: a Microsoft Teams user by their Entra object id (`aadObjectId`), a GUID
 *   in lower case as Teams sends it.
 * - `web:NAME`: a console person; NAME is 1–64 of letters, digits, `.`, `_`, `@`, `-`, starting
 *   with a letter or digit.
 * - `oidc:VALUE`: a person signed in to the console through the OpenID Connect issuer; VALUE is the
 *   claim the config names (`sub` by default, or `email`), 1–255 printable ASCII characters.
 * - `oidc:group:NAME`: a value of the issuer's groups claim.
 */
export type IdentityKind = 'slack_user' | 'slack_group' | 'discord_user' | 'discord_role' | 'teams_user' | 'web' | 'oidc_user' | 'oidc_group';

export interface Identity {
  kind: IdentityKind;
  /** The platform's own id (Slack or Discord id, or the web name). */
  id: string;
  /** The canonical text, e.g. `discord:user:223456789012345678`. */
  text: string;
}

export const SLACK_USER_ID = /^[UW][A-Z0-9]{1,31}$/;
export const SLACK_GROUP_ID = /^S[A-Z0-9]{1,31}$/;
export const DISCORD_SNOWFLAKE = /^\d{17,20}$/;
export const ENTRA_OBJECT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const WEB_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/** A claim value as an identity: printable ASCII without spaces, so it reads the same in every log and config. */
export const OIDC_VALUE = /^[\x21-\x7E]{1,255}$/;

const PREFIXES: ReadonlyArray<[IdentityKind, string, RegExp]> = [
  ['slack_group', 'slack:group:', SLACK_GROUP_ID],
  ['slack_user', 'slack:', SLACK_USER_ID],
  ['discord_user', 'discord:user:', DISCORD_SNOWFLAKE],
  ['discord_role', 'discord:role:', DISCORD_SNOWFLAKE],
  ['teams_user', 'teams:', ENTRA_OBJECT_ID],
  ['web', 'web:', WEB_NAME],
  ['oidc_group', 'oidc:group:', OIDC_VALUE],
  ['oidc_user', 'oidc:', OIDC_VALUE],
];

/** Every form, for error messages. */
export const IDENTITY_FORMS =
  'slack:U…, slack:W…, slack:group:S…, discord:user:<id>, discord:role:<id>, teams:<object id>, web:<name>, oidc:<claim> or oidc:group:<name>';
/** The forms that name one person (who can click), for owners, `--as` and people. */
export const PERSON_FORMS = 'slack:U…, slack:W…, discord:user:<id>, teams:<object id>, web:<name> or oidc:<claim>';

/** The identity a text names, or null when it is not one. */
export function parseIdentity(text: unknown): Identity | null {
  if (typeof text !== 'string') return null;
  for (const [kind, prefix, pattern] of PREFIXES) {
    if (!text.startsWith(prefix)) continue;
    const id = text.slice(prefix.length);
    // `slack:group:S1` must not fall through to the user form: the first matching prefix decides.
    return pattern.test(id) ? { kind, id, text } : null;
  }
  return null;
}

/** Groups and roles hold any number of people; every other identity is one person. */
export const isPersonKind = (kind: IdentityKind): boolean =>
  kind === 'slack_user' || kind === 'discord_user' || kind === 'teams_user' || kind === 'web' || kind === 'oidc_user';

/** The identity if the text names one person (not a group or role), else null. */
export function parsePersonIdentity(text: unknown): Identity | null {
  const identity = parseIdentity(text);
  return identity && isPersonKind(identity.kind) ? identity : null;
}

/** What is wrong with a text as an identity (for `field: message` errors), or null when it is fine. */
export function identityProblem(text: unknown, options: { person?: boolean } = {}): string | null {
  const identity = parseIdentity(text);
  if (!identity) return `expected ${options.person ? PERSON_FORMS : IDENTITY_FORMS}`;
  if (options.person && !isPersonKind(identity.kind)) return `expected one person (${PERSON_FORMS}), not a group or role`;
  return null;
}

export const slackUserIdentity = (userId: string): string => `slack:${userId}`;
export const slackGroupIdentity = (groupId: string): string => `slack:group:${groupId}`;
export const discordUserIdentity = (userId: string): string => `discord:user:${userId}`;
export const discordRoleIdentity = (roleId: string): string => `discord:role:${roleId}`;
/** A Teams user's identity, or null when the object id is not a GUID. */
export const teamsUserIdentity = (aadObjectId: string): string | null => {
  const id = aadObjectId.toLowerCase();
  return ENTRA_OBJECT_ID.test(id) ? `teams:${id}` : null;
};

/**
 * The identity of a person the issuer vouched for, or null when the claim value cannot be one (empty,
 * too long, spaces or non-ASCII, or shaped like a group, which would let a claim pass for a group).
 */
export function oidcIdentity(value: string): string | null {
  if (!OIDC_VALUE.test(value) || value.startsWith('group:')) return null;
  return `oidc:${value}`;
}

export const oidcGroupIdentity = (group: string): string | null => (OIDC_VALUE.test(group) ? `oidc:group:${group}` : null);

/** `operator` or `web:operator` → `web:operator`; null when the name is not a valid web name. */
export function webIdentity(name: string): string | null {
  const bare = name.startsWith('web:') ? name.slice(4) : name;
  return WEB_NAME.test(bare) ? `web:${bare}` : null;
}
