import type * as OpenIdClient from 'openid-client';
import type { OidcSignInConfig } from '../config/console-config.js';
import { oidcIdentity, OIDC_VALUE } from '../core/identity.js';
import type { Clock } from '../core/model.js';

/**
 * Console sign-in through an OpenID Connect issuer, with `openid-client`: the authorization code
 * flow with PKCE (S256), `state` and `nonce`. What the browser must bring back (state, nonce, the
 * PKCE verifier) travels in a short-lived HttpOnly cookie set when the flow starts, so any twokey
 * process can finish a flow another one started and nothing is stored for abandoned sign-ins. The
 * cookie alone is worth nothing: the code it completes comes from the issuer, once, for this client.
 */

/** A flow not finished within this long is refused: the person starts again. */
export const OIDC_FLOW_TTL_MS = 10 * 60_000;
/** More groups than this is a misconfigured claim, not a person. */
const MAX_GROUPS = 200;

export type OidcProblem = 'no-flow' | 'flow-expired' | 'refused-by-issuer' | 'not-verified' | 'no-identity' | 'unverified-email' | 'issuer-unreachable';

export type OidcResult = { ok: true; identity: string; groups: string[] } | { ok: false; problem: OidcProblem; detail?: string };

interface PendingFlow {
  state: string;
  nonce: string;
  verifier: string;
  /** ms since the epoch, by the console's clock */
  startedAt: number;
}

export interface OidcSignIn {
  /** "Sign in with <name>". */
  name: string;
  issuer: string;
  /** The issuer URL to send the browser to, and the cookie value that must come back with it. */
  start(): Promise<{ url: string; flow: string }>;
  /** Checks the issuer's answer (the callback URL as received) against the flow cookie. */
  finish(callbackUrl: URL, flow: string | undefined): Promise<OidcResult>;
}

export interface OidcSignInDeps {
  config: OidcSignInConfig;
  clock: Clock;
  /** Where the issuer sends the browser back: `<public URL>/console/auth/callback`, registered at the issuer. */
  redirectUri: () => string;
}

function encodeFlow(flow: PendingFlow): string {
  return Buffer.from(JSON.stringify(flow)).toString('base64url');
}

function decodeFlow(text: string | undefined): PendingFlow | null {
  if (!text || text.length > 2048) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (typeof value !== 'object' || value === null) return null;
    const { state, nonce, verifier, startedAt } = value as Record<string, unknown>;
    if (typeof state !== 'string' || typeof nonce !== 'string' || typeof verifier !== 'string' || typeof startedAt !== 'number') return null;
    return { state, nonce, verifier, startedAt };
  } catch {
    return null;
  }
}

/** The groups claim as a list of names: a list of strings, or one string; anything else is no groups. */
export function groupsFrom(value: unknown): string[] {
  const names = Array.isArray(value) ? value : typeof value === 'string' ? [value] : [];
  return [...new Set(names.filter((name): name is string => typeof name === 'string' && OIDC_VALUE.test(name)))].slice(0, MAX_GROUPS);
}

/** The identity and groups the claims give, or the problem with them. Pure. */
export function identityFromClaims(claims: Record<string, unknown>, config: Pick<OidcSignInConfig, 'identityClaim' | 'groupsClaim'>): OidcResult {
  const value = claims[config.identityClaim];
  if (config.identityClaim === 'email' && claims.email_verified === false) return { ok: false, problem: 'unverified-email' };
  const identity = typeof value === 'string' ? oidcIdentity(value) : null;
  if (!identity) return { ok: false, problem: 'no-identity', detail: config.identityClaim };
  return { ok: true, identity, groups: config.groupsClaim ? groupsFrom(claims[config.groupsClaim]) : [] };
}

/** openid-client (with oauth4webapi and jose) loads with the first sign-in, not before the server answers. */
let openIdClient: Promise<typeof OpenIdClient> | null = null;
const loadOpenIdClient = () => (openIdClient ??= import('openid-client'));

export function createOidcSignIn({ config, clock, redirectUri }: OidcSignInDeps): OidcSignIn {
  let discovered: Promise<OpenIdClient.Configuration> | null = null;

  /** Discovery once, on first use; a failure is not kept, so the next sign-in tries again. */
  function issuerConfiguration(): Promise<OpenIdClient.Configuration> {
    discovered ??= loadOpenIdClient()
      .then((client) =>
        client.discovery(new URL(config.issuer), config.clientId, undefined, client.ClientSecretBasic(config.clientSecret), {
          // The config refuses http:// except for a local issuer (a test or a development one).
          ...(new URL(config.issuer).protocol === 'http:' ? { execute: [client.allowInsecureRequests] } : {}),
          timeout: 10,
        }),
      )
      .catch((error: unknown) => {
        discovered = null;
        throw error;
      });
    return discovered;
  }

  async function start() {
    const issuer = await issuerConfiguration();
    const client = await loadOpenIdClient();
    const flow: PendingFlow = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      startedAt: clock().getTime(),
    };
    const url = client.buildAuthorizationUrl(issuer, {
      redirect_uri: redirectUri(),
      scope: config.scopes.join(' '),
      response_type: 'code',
      state: flow.state,
      nonce: flow.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(flow.verifier),
      code_challenge_method: 'S256',
    });
    return { url: url.toString(), flow: encodeFlow(flow) };
  }

  async function finish(callbackUrl: URL, flowText: string | undefined): Promise<OidcResult> {
    const flow = decodeFlow(flowText);
    if (!flow) return { ok: false, problem: 'no-flow' };
    const age = clock().getTime() - flow.startedAt;
    if (!(age >= 0 && age < OIDC_FLOW_TTL_MS)) return { ok: false, problem: 'flow-expired' };
    const issuerError = callbackUrl.searchParams.get('error');
    if (issuerError !== null) return { ok: false, problem: 'refused-by-issuer', detail: issuerError.slice(0, 64) };
    let issuer: OpenIdClient.Configuration;
    try {
      issuer = await issuerConfiguration();
    } catch {
      return { ok: false, problem: 'issuer-unreachable' };
    }
    // The callback as the issuer addressed it: openid-client compares it with the redirect URI sent.
    const client = await loadOpenIdClient();
    const received = new URL(redirectUri());
    received.search = callbackUrl.search;
    let claims: Record<string, unknown>;
    try {
      const tokens = await client.authorizationCodeGrant(issuer, received, {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
      claims = { ...(tokens.claims() ?? {}) };
      const sub = typeof claims.sub === 'string' ? claims.sub : null;
      // Some issuers put email or groups only in userinfo (Okta's groups, for one).
      const missing = claims[config.identityClaim] === undefined || (config.groupsClaim !== null && claims[config.groupsClaim] === undefined);
      if (missing && sub && issuer.serverMetadata().userinfo_endpoint) {
        const userinfo = await client.fetchUserInfo(issuer, tokens.access_token, sub);
        claims = { ...userinfo, ...claims, ...pick(userinfo, [config.identityClaim, config.groupsClaim]) };
      }
    } catch (error) {
      return { ok: false, problem: 'not-verified', detail: errorCode(client, error) };
    }
    return identityFromClaims(claims, config);
  }

  return { name: config.name, issuer: config.issuer, start, finish };
}

function pick(source: Record<string, unknown>, names: ReadonlyArray<string | null>): Record<string, unknown> {
  return Object.fromEntries(names.filter((name): name is string => name !== null && source[name] !== undefined).map((name) => [name, source[name]]));
}

/** A short code for the log and the page: never the issuer's whole message, which may quote tokens. */
function errorCode(client: typeof OpenIdClient, error: unknown): string {
  if (error instanceof client.AuthorizationResponseError || error instanceof client.ResponseBodyError) return error.error;
  if (error instanceof Error && 'code' in error && typeof error.code === 'string') return error.code;
  return 'verification_failed';
}
