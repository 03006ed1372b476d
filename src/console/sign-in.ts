import { createHmac, randomBytes } from 'node:crypto';
import { TwokeyError } from '../core/errors.js';
import { oidcGroupIdentity, oidcIdentity, webIdentity as parseWebIdentity } from '../core/identity.js';
import type { Clock, Decider } from '../core/model.js';
import { digestsEqual, sha256Hex } from '../core/secrets.js';
import type { ApproverLinkRecord, ConsoleSessionRecord, ConsoleSessionStore } from './ports.js';

/** Sign-in links work once, for 10 minutes (docs/console.md). */
export const LINK_TTL_MS = 10 * 60_000;
/** A console session lasts one working day; after that the person asks for a new link. */
export const SESSION_TTL_MS = 12 * 3_600_000;

const LINK_TOKEN = /^tk_link_[A-Za-z0-9_-]{43}$/;
const SESSION_SECRET = /^[A-Za-z0-9_-]{43}$/;

/** `operator` or `web:operator` → `web:operator` (the core's identity grammar); anything else is refused. */
export function webIdentity(name: string): string {
  const identity = parseWebIdentity(name);
  if (!identity) {
    throw new TwokeyError('invalid_request', 'an approver name is 1-64 letters, digits, "_", ".", "@" or "-", starting with a letter or digit (web:NAME)');
  }
  return identity;
}

/** `oidc:VALUE` as the issuer's sign-in stores it; a group (`oidc:group:…`) has no sessions of its own. */
function signedInIdentity(name: string): string {
  const identity = name.startsWith('oidc:group:') ? null : oidcIdentity(name.slice('oidc:'.length));
  if (!identity) throw new TwokeyError('invalid_request', 'an issuer sign-in is oidc:VALUE, the value of the configured identity claim');
  return identity;
}

export type LinkProblem = 'malformed' | 'unknown' | 'used' | 'expired';

export type LinkCheck = { ok: true; approver: string; expiresAt: Date } | { ok: false; problem: LinkProblem };

/** Whether a stored link may still sign someone in at `now`. Pure, so tests pin the boundary. */
export function checkLink(row: ApproverLinkRecord | null, now: Date): LinkCheck {
  if (!row) return { ok: false, problem: 'unknown' };
  if (row.usedAt) return { ok: false, problem: 'used' };
  if (now.getTime() >= row.expiresAt.getTime()) return { ok: false, problem: 'expired' };
  return { ok: true, approver: row.approver, expiresAt: row.expiresAt };
}

export interface ConsoleSession {
  approver: string;
  /** The issuer's groups claim when an OpenID Connect issuer signed this person in; empty otherwise. */
  groups: readonly string[];
  idHash: string;
  expiresAt: Date;
  /** The synchronizer token every form of this session must carry. */
  csrfToken: string;
}

/**
 * The person a session decides as. A session an issuer opened carries its groups: as
 * `oidc:group:NAME` they match approvers lists, as bare names approver rules read them.
 */
export function deciderOf(session: Pick<ConsoleSession, 'approver' | 'groups'>): Decider {
  if (session.groups.length === 0) return { identity: session.approver, via: 'web' };
  const memberOf = session.groups.map(oidcGroupIdentity).filter((group): group is string => group !== null);
  return { identity: session.approver, memberOf, groups: [...session.groups], via: 'web' };
}

/** Whether a stored session is live at `now`. Pure, so tests pin the boundary. */
export function sessionIsLive(row: ConsoleSessionRecord | null, now: Date): row is ConsoleSessionRecord {
  return row !== null && row.revokedAt === null && now.getTime() < row.expiresAt.getTime();
}

/**
 * The CSRF token is derived from the session secret, which only the HttpOnly cookie holds: a page
 * on another origin can neither read the cookie nor compute the token, and a token stolen from one
 * session is useless in any other. A different HMAC key from the stored hash keeps the two apart.
 */
export function csrfTokenFor(sessionSecret: string): string {
  return createHmac('sha256', sessionSecret).update('twokey console csrf v1').digest('hex');
}

export function csrfTokenMatches(session: ConsoleSession, presented: string | undefined): boolean {
  return typeof presented === 'string' && /^[0-9a-f]{64}$/.test(presented) && digestsEqual(presented, session.csrfToken);
}

/** Lets an audit line tell sessions apart without naming anything that could open one. */
const sessionRef = (idHash: string): string => idHash.slice(0, 12);

export interface ConsoleAuthDeps {
  sessions: ConsoleSessionStore;
  clock: Clock;
}

/** Sign-in links, sessions and sign-out: every step audited in the transaction that makes it. */
export function createConsoleAuth({ sessions, clock }: ConsoleAuthDeps) {
  async function mintLink(name: string, actor = 'operator') {
    const approver = webIdentity(name);
    const token = `tk_link_${randomBytes(32).toString('base64url')}`;
    const now = clock();
    const expiresAt = new Date(now.getTime() + LINK_TTL_MS);
    await sessions.transaction(async (tx) => {
      await tx.insertLink({ tokenHash: sha256Hex(token), approver, createdAt: now, expiresAt });
      await tx.appendAudit({ type: 'console.link_created', actor, data: { approver, expiresAt: expiresAt.toISOString() } }, now);
    });
    return { approver, token, expiresAt };
  }

  /** Reads a link without using it: the page that asks "sign in as …?" must not spend it. */
  async function inspectLink(token: string): Promise<LinkCheck> {
    if (!LINK_TOKEN.test(token)) return { ok: false, problem: 'malformed' };
    return checkLink(await sessions.getLink(sha256Hex(token)), clock());
  }

  /** Spends the link and opens a session; returns the secret for the cookie. */
  async function signIn(token: string): Promise<{ ok: true; secret: string; session: ConsoleSession } | { ok: false; problem: LinkProblem }> {
    if (!LINK_TOKEN.test(token)) return { ok: false, problem: 'malformed' };
    const tokenHash = sha256Hex(token);
    const now = clock();
    const secret = randomBytes(32).toString('base64url');
    const idHash = sha256Hex(secret);
    const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
    const link = await sessions.transaction(async (tx) => {
      const used = await tx.useLink(tokenHash, now);
      if (!used) return null;
      await tx.insertSession({ idHash, approver: used.approver, groups: null, createdAt: now, expiresAt });
      await tx.appendAudit({ type: 'console.signed_in', actor: used.approver, data: { session: sessionRef(idHash), expiresAt: expiresAt.toISOString() } }, now);
      return used;
    });
    if (!link) {
      const check = checkLink(await sessions.getLink(tokenHash), now);
      // The UPDATE refused it, so the row says why; a link that looks valid here lost a race.
      return { ok: false, problem: check.ok ? 'used' : check.problem };
    }
    return { ok: true, secret, session: { approver: link.approver, groups: [], idHash, expiresAt, csrfToken: csrfTokenFor(secret) } };
  }

  /**
   * Opens a session for a person an OpenID Connect issuer vouched for (the caller checked the code,
   * state, nonce and ID token). The groups are kept as the issuer said them at sign-in.
   */
  async function signInVerified(approver: string, groups: readonly string[], issuer: string) {
    const now = clock();
    const secret = randomBytes(32).toString('base64url');
    const idHash = sha256Hex(secret);
    const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
    await sessions.transaction(async (tx) => {
      await tx.insertSession({ idHash, approver, groups: [...groups], createdAt: now, expiresAt });
      await tx.appendAudit(
        {
          type: 'console.signed_in',
          actor: approver,
          data: { session: sessionRef(idHash), expiresAt: expiresAt.toISOString(), via: 'oidc', issuer, groups: [...groups] },
        },
        now,
      );
    });
    return { secret, session: { approver, groups: [...groups], idHash, expiresAt, csrfToken: csrfTokenFor(secret) } satisfies ConsoleSession };
  }

  async function authenticate(secret: string | undefined): Promise<ConsoleSession | null> {
    if (!secret || !SESSION_SECRET.test(secret)) return null;
    const idHash = sha256Hex(secret);
    const row = await sessions.getSession(idHash);
    if (!sessionIsLive(row, clock())) return null;
    return { approver: row.approver, groups: row.groups ?? [], idHash, expiresAt: row.expiresAt, csrfToken: csrfTokenFor(secret) };
  }

  async function signOut(session: ConsoleSession): Promise<void> {
    const now = clock();
    await sessions.transaction(async (tx) => {
      if (!(await tx.revokeSession(session.idHash, now))) return;
      await tx.appendAudit({ type: 'console.signed_out', actor: session.approver, data: { session: sessionRef(session.idHash) } }, now);
    });
  }

  /** Ends every session and unused link of one approver (a lost laptop, a person leaving). */
  /** `NAME`, `web:NAME`, or `oidc:VALUE` (a person the issuer signed in: sessions only, no links). */
  async function revokeSessions(name: string, actor = 'operator') {
    const approver = name.startsWith('oidc:') ? signedInIdentity(name) : webIdentity(name);
    const now = clock();
    return sessions.transaction(async (tx) => {
      const revokedSessions = await tx.revokeSessionsOf(approver, now);
      const expiredLinks = await tx.expireLinksOf(approver, now);
      await tx.appendAudit({ type: 'console.sessions_revoked', actor, data: { approver, sessions: revokedSessions, links: expiredLinks } }, now);
      return { approver, sessions: revokedSessions, links: expiredLinks };
    });
  }

  return { mintLink, inspectLink, signIn, signInVerified, authenticate, signOut, revokeSessions };
}

export type ConsoleAuth = ReturnType<typeof createConsoleAuth>;
