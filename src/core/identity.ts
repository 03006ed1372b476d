/**
 * The one grammar of identities. Config (approvers, owners, people), the CLI's `--as` and
 * `--owner`, the console's sign-in names and the chat transports all parse and build identities
 * through one `IdentityGrammar`, so an identity accepted in one place is never refused (or
 * silently useless) in another. The grammar is built once from the forms below and the forms each
 * chat platform declares (`src/platforms/index.ts`: `identities`); the core itself names no platform.
 *
 * The core's own forms:
 * - `web:NAME`: a console person; NAME is 1–64 of letters, digits, `.`, `_`, `@`, `-`, starting
 *   with a letter or digit.
 * - `oidc:VALUE`: a person signed in to the console through the OpenID Connect issuer; VALUE is the
 *   claim the config names (`sub` by default, or `email`), 1–255 printable ASCII characters.
 * - `oidc:group:NAME`: a value of the issuer's groups claim.
 */

/**
 * One way to write an identity: `<prefix><id>`, the id matching `pattern` (anchored). Among the
 * forms whose prefix a text starts with, the longest prefix decides (`slack:group:S1` is a group,
 * never a malformed `slack:` user).
 */
export interface IdentityForm {
  /** Unique among all forms, e.g. `slack_user`; what `Identity.kind` holds. */
  readonly kind: string;
  readonly prefix: string;
  /** The id after the prefix; anchored with `^…$`. */
  readonly pattern: RegExp;
  /** One person who can click (an owner, `--as`, a person's identity); false for a group or role. */
  readonly person: boolean;
  /** How error messages list it: `slack:U…, slack:W…`. */
  readonly shown: string;
  /** One identity of this form in full, `slack:U0ALICE`: the registry's test parses it. */
  readonly example: string;
}

/** The kind of an identity: the `kind` of the form it was written in. */
export type IdentityKind = string;

export interface Identity {
  kind: IdentityKind;
  /** The platform's own id (Slack or Discord id, or the web name). */
  id: string;
  /** The canonical text, e.g. `discord:user:223456789012345678`. */
  text: string;
}

export const WEB_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
/** A claim value as an identity: printable ASCII without spaces, so it reads the same in every log and config. */
export const OIDC_VALUE = /^[\x21-\x7E]{1,255}$/;

/** The forms of people the core signs in itself (the console's names and the OpenID Connect issuer's). */
export const CORE_IDENTITY_FORMS: readonly IdentityForm[] = [
  { kind: 'web', prefix: 'web:', pattern: WEB_NAME, person: true, shown: 'web:<name>', example: 'web:alice' },
  { kind: 'oidc_user', prefix: 'oidc:', pattern: OIDC_VALUE, person: true, shown: 'oidc:<claim>', example: 'oidc:alice@example.com' },
  { kind: 'oidc_group', prefix: 'oidc:group:', pattern: OIDC_VALUE, person: false, shown: 'oidc:group:<name>', example: 'oidc:group:finance' },
];

/** Every identity twokey accepts, with the words its errors use. */
export interface IdentityGrammar {
  /** Every form: the platforms' first, then the core's, in the order error messages list them. */
  readonly forms: readonly IdentityForm[];
  /** Every form, for error messages. */
  readonly IDENTITY_FORMS: string;
  /** The forms that name one person (who can click), for owners, `--as` and people. */
  readonly PERSON_FORMS: string;
  /**
   * Finds the chat platforms' group identities in a text (global): an approver rule names the groups
   * it asks about, which a platform then resolves for a clicker (Slack's user groups).
   */
  readonly platformGroupPattern: RegExp;
  /** The identity a text names, or null when it is not one. */
  parseIdentity(text: unknown): Identity | null;
  /** The identity if the text names one person (not a group or role), else null. */
  parsePersonIdentity(text: unknown): Identity | null;
  /** Groups and roles hold any number of people; every other identity is one person. */
  isPersonKind(kind: IdentityKind): boolean;
  /** What is wrong with a text as an identity (for `field: message` errors), or null when it is fine. */
  identityProblem(text: unknown, options?: { person?: boolean }): string | null;
}

const listed = (items: readonly string[]): string => (items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`);
const unanchored = (pattern: RegExp): string => `(?:${pattern.source.replace(/^\^/, '').replace(/\$$/, '')})`;
const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The grammar of the chat platforms' forms and the core's. Throws when two forms share a kind or a
 * prefix: one of them could never be written.
 */
export function identityGrammar(platformForms: readonly IdentityForm[]): IdentityGrammar {
  const forms = [...platformForms, ...CORE_IDENTITY_FORMS];
  for (const [index, form] of forms.entries()) {
    const earlier = forms.slice(0, index).find((other) => other.kind === form.kind || other.prefix === form.prefix);
    if (earlier) throw new Error(`identity forms ${earlier.kind} and ${form.kind} share a kind or the prefix "${form.prefix}"`);
    if (!form.pattern.source.startsWith('^') || !form.pattern.source.endsWith('$'))
      throw new Error(`identity form ${form.kind}: its pattern must be anchored (^…$)`);
  }
  const byPrefix = [...forms].sort((a, b) => b.prefix.length - a.prefix.length);
  const personKinds = new Set(forms.filter((form) => form.person).map((form) => form.kind));
  const IDENTITY_FORMS = listed(forms.map((form) => form.shown));
  const PERSON_FORMS = listed(forms.filter((form) => form.person).map((form) => form.shown));
  const groups = platformForms.filter((form) => !form.person);
  // Never empty: a pattern that matches nothing when no platform declares a group.
  const platformGroupPattern = new RegExp(groups.length ? groups.map((form) => `${escaped(form.prefix)}${unanchored(form.pattern)}`).join('|') : '(?!)', 'g');

  const isPersonKind = (kind: IdentityKind): boolean => personKinds.has(kind);
  function parseIdentity(text: unknown): Identity | null {
    if (typeof text !== 'string') return null;
    const form = byPrefix.find((candidate) => text.startsWith(candidate.prefix));
    if (!form) return null;
    const id = text.slice(form.prefix.length);
    // `slack:group:S1` must not fall through to the user form: the longest matching prefix decides.
    return form.pattern.test(id) ? { kind: form.kind, id, text } : null;
  }
  function parsePersonIdentity(text: unknown): Identity | null {
    const identity = parseIdentity(text);
    return identity && isPersonKind(identity.kind) ? identity : null;
  }
  function identityProblem(text: unknown, options: { person?: boolean } = {}): string | null {
    const identity = parseIdentity(text);
    if (!identity) return `expected ${options.person ? PERSON_FORMS : IDENTITY_FORMS}`;
    if (options.person && !isPersonKind(identity.kind)) return `expected one person (${PERSON_FORMS}), not a group or role`;
    return null;
  }
  return { forms, IDENTITY_FORMS, PERSON_FORMS, platformGroupPattern, parseIdentity, parsePersonIdentity, isPersonKind, identityProblem };
}

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
