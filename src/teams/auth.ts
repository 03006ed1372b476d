import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';

/**
 * Who may post activities to twokey: the Bot Framework channel, proving it with a JWT in
 * `Authorization: Bearer` (RS256), signed by a key the channel's OpenID metadata publishes, issued
 * by that metadata's issuer, for this app (`aud` = TEAMS_APP_ID), and naming in its `serviceUrl`
 * claim the service the activity says it came from (else a token for one conversation's service
 * could vouch for an activity pointing twokey's replies elsewhere).
 *
 * `jose` rather than the Agents SDK's `authorizeJWT`: the SDK picks the keys URL from the token's
 * own issuer and hard-codes Microsoft's (`login.botframework.com`), so it cannot be pointed at
 * another metadata document (a sovereign cloud's, or a test's local issuer); nor does it check the
 * `serviceUrl` claim, and it is Express middleware. `jose` (already what the console's OpenID client
 * verifies with) fetches the metadata's JWKS, caches it, and refetches on an unknown `kid`, which is
 * how the Bot Framework rolls its keys.
 */

export interface TeamsAuthOptions {
  appId: string;
  /** `https://login.botframework.com/v1/.well-known/openidconfiguration` unless configured. */
  openIdMetadataUrl: string;
  clock: () => Date;
  /** How long the metadata is trusted before it is read again. */
  metadataMaxAgeMs?: number;
  fetch?: typeof fetch;
}

export type AuthCheck = { ok: true } | { ok: false; problem: string };

/** The clocks of the channel and twokey may differ this much (what the Bot Framework's own SDKs allow). */
const CLOCK_TOLERANCE_S = 300;

interface Metadata {
  issuer: string;
  keys: JWTVerifyGetKey;
  at: number;
}

export function createTeamsAuth(options: TeamsAuthOptions) {
  const fetcher = options.fetch ?? fetch;
  const maxAgeMs = options.metadataMaxAgeMs ?? 24 * 60 * 60_000;
  let metadata: Metadata | null = null;
  let loading: Promise<Metadata> | null = null;

  async function loadMetadata(): Promise<Metadata> {
    const response = await fetcher(options.openIdMetadataUrl, { signal: AbortSignal.timeout(10_000) });
    if (!response.ok) throw new Error(`the OpenID metadata answered ${response.status}`);
    const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
    if (typeof document.issuer !== 'string' || typeof document.jwks_uri !== 'string') throw new Error('the OpenID metadata names no issuer or jwks_uri');
    return { issuer: document.issuer, keys: createRemoteJWKSet(new URL(document.jwks_uri), { timeoutDuration: 10_000 }), at: Date.now() };
  }

  async function current(): Promise<Metadata> {
    if (metadata && Date.now() - metadata.at < maxAgeMs) return metadata;
    loading ??= loadMetadata()
      .then((loaded) => (metadata = loaded))
      .finally(() => (loading = null));
    return loading;
  }

  /**
   * Checks the request's bearer token for an activity claiming `serviceUrl`; null when the body is
   * not even JSON (refused with a 400 once the token checks out). Never throws.
   */
  async function check(authorization: string | undefined, serviceUrl: unknown): Promise<AuthCheck> {
    const token = /^Bearer (\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token) return { ok: false, problem: 'no bearer token' };
    let known: Metadata;
    try {
      known = await current();
    } catch (error) {
      return { ok: false, problem: `cannot read the OpenID metadata: ${error instanceof Error ? error.message : 'unknown'}` };
    }
    try {
      const { payload } = await jwtVerify(token, known.keys, {
        issuer: known.issuer,
        audience: options.appId,
        algorithms: ['RS256'],
        clockTolerance: CLOCK_TOLERANCE_S,
        currentDate: options.clock(),
      });
      if (serviceUrl === null) return { ok: true };
      if (typeof payload.serviceUrl !== 'string' || typeof serviceUrl !== 'string' || !sameService(payload.serviceUrl, serviceUrl)) {
        return { ok: false, problem: "the token's serviceUrl is not the activity's" };
      }
      return { ok: true };
    } catch (error) {
      // jose's codes (ERR_JWS_SIGNATURE_VERIFICATION_FAILED, ERR_JWT_CLAIM_VALIDATION_FAILED, …): never the token.
      const code = typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'invalid token';
      const claim = typeof (error as { claim?: unknown }).claim === 'string' ? ` (${(error as { claim: string }).claim})` : '';
      return { ok: false, problem: `${code}${claim}` };
    }
  }

  return { check };
}

/** The same service, whatever the trailing slash: Teams writes `https://smba.trafficmanager.net/teams/`. */
const sameService = (a: string, b: string): boolean => a.replace(/\/+$/, '').toLowerCase() === b.replace(/\/+$/, '').toLowerCase();

export type TeamsAuth = ReturnType<typeof createTeamsAuth>;
