import * as z from 'zod';

/**
 * `console:` in the config file: how people sign in to the web console besides one-time links.
 * Today one OpenID Connect issuer (authorization code + PKCE). The client secret is never in the
 * file: `clientSecretEnv` names the environment variable that holds it, read once at start.
 */
export interface OidcSignInConfig {
  issuer: string;
  /** "Sign in with <name>" on the sign-in page; defaults to the issuer's host. */
  name: string;
  clientId: string;
  clientSecret: string;
  /** Where the secret came from, for error messages (never the secret itself). */
  clientSecretEnv: string;
  scopes: string[];
  /** The claim whose value becomes the identity `oidc:<value>`: `sub` (default), `email`, or another. */
  identityClaim: string;
  /** A claim holding the person's groups (a list of strings), for `oidc:group:NAME` approvers and approver rules. */
  groupsClaim: string | null;
}

export interface ConsoleSignInConfig {
  oidc?: OidcSignInConfig;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CLAIM_NAME = /^[A-Za-z_][A-Za-z0-9_.:/-]{0,127}$/;

const issuerUrl = z.string().refine(
  (text) => {
    try {
      const url = new URL(text);
      // An issuer's discovery document and keys must not travel in clear, except to a local test issuer.
      return url.protocol === 'https:' || (url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname));
    } catch {
      return false;
    }
  },
  { error: 'expected an https:// issuer URL (http:// only for localhost)' },
);

export const consoleSchema = z
  .strictObject({
    oidc: z
      .strictObject({
        issuer: issuerUrl,
        name: z.string().min(1).max(60).optional(),
        clientId: z.string().min(1, { error: 'expected the client id the issuer gave twokey' }),
        clientSecretEnv: z.string().regex(ENV_NAME, { error: 'expected the name of an environment variable' }).default('TWOKEY_OIDC_CLIENT_SECRET'),
        scopes: z
          .array(z.string().regex(/^[\x21-\x7E]+$/, { error: 'expected a scope without spaces' }))
          .min(1)
          .default(['openid', 'email', 'profile']),
        identityClaim: z.string().regex(CLAIM_NAME, { error: 'expected a claim name such as sub or email' }).default('sub'),
        groupsClaim: z.string().regex(CLAIM_NAME, { error: 'expected a claim name such as groups' }).optional(),
      })
      .refine((oidc) => oidc.scopes.includes('openid'), { error: 'scopes must include openid', path: ['scopes'] })
      .optional(),
  })
  .default({});

/** The section as the runtime reads it, with the client secret taken from the environment. */
export function buildConsoleConfig(parsed: z.output<typeof consoleSchema>, env: NodeJS.ProcessEnv, issues: string[]): ConsoleSignInConfig {
  const oidc = parsed.oidc;
  if (!oidc) return {};
  const clientSecret = env[oidc.clientSecretEnv];
  if (clientSecret === undefined || clientSecret === '') {
    issues.push(`console.oidc.clientSecretEnv: environment variable ${oidc.clientSecretEnv} is not set (it holds the client secret)`);
    return {};
  }
  return {
    oidc: {
      issuer: oidc.issuer,
      name: oidc.name ?? new URL(oidc.issuer).host,
      clientId: oidc.clientId,
      clientSecret,
      clientSecretEnv: oidc.clientSecretEnv,
      scopes: oidc.scopes,
      identityClaim: oidc.identityClaim,
      groupsClaim: oidc.groupsClaim ?? null,
    },
  };
}
