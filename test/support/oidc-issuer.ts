import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import Provider from 'oidc-provider';

/**
 * A real OpenID Connect issuer on a loopback port (`oidc-provider`), with keys of its own and its
 * development login and consent pages: any login name signs in as the account of that name. Each
 * account has `email` (`<name>@example.com`, verified unless the name starts with `unverified`) and
 * the `groups` the test gives it.
 */
export interface TestIssuer {
  issuer: string;
  clientId: string;
  clientSecret: string;
  close(): Promise<void>;
}

export async function startTestIssuer(options: { redirectUri: string; groups?: Record<string, string[]> }): Promise<TestIssuer> {
  const server: Server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  const issuer = `http://127.0.0.1:${address.port}`;
  const clientId = 'twokey-console';
  const clientSecret = randomBytes(24).toString('base64url');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' };

  const provider = new Provider(issuer, {
    clients: [
      { client_id: clientId, client_secret: clientSecret, redirect_uris: [options.redirectUri], grant_types: ['authorization_code'], response_types: ['code'] },
    ],
    jwks: { keys: [jwk as never] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    pkce: { required: () => true },
    scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
    features: { devInteractions: { enabled: true } },
    ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 3600, IdToken: 600, Interaction: 600, Session: 3600 },
    findAccount: (_ctx: unknown, accountId: string) => ({
      accountId,
      claims: () => ({
        sub: accountId,
        email: `${accountId}@example.com`,
        email_verified: !accountId.startsWith('unverified'),
        groups: options.groups?.[accountId] ?? [],
      }),
    }),
  });
  // The development pages warn on every request; a test has no use for it.
  provider.on('server_error', (_ctx, error) => console.error('test issuer error', error));
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

/**
 * A browser enough for the code flow: follows redirects by hand with a cookie jar per origin, so each
 * site only ever gets its own cookies, and submits the issuer's login and consent forms.
 */
export function cookieBrowser() {
  const jars = new Map<string, Map<string, string>>();
  const jarOf = (url: URL): Map<string, string> => {
    const jar = jars.get(url.origin) ?? new Map<string, string>();
    jars.set(url.origin, jar);
    return jar;
  };

  async function request(url: string, init: { method?: string; body?: string } = {}) {
    const target = new URL(url);
    const jar = jarOf(target);
    const headers: Record<string, string> = {};
    if (jar.size > 0) headers.cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    if (init.body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetch(target, {
      method: init.method ?? 'GET',
      headers,
      redirect: 'manual',
      ...(init.body !== undefined ? { body: init.body } : {}),
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      // An expired cookie (cleared) leaves the jar.
      if (value === '' || /max-age=0|expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name);
      else jar.set(name, value);
    }
    const location = response.headers.get('location');
    return { status: response.status, location: location ? new URL(location, target).toString() : null, body: await response.text() };
  }

  /** GETs and follows redirects until a page answers; returns it and the URL it came from. */
  async function follow(url: string, stopAt?: (url: string) => boolean) {
    let current = url;
    for (let hops = 0; hops < 20; hops++) {
      if (stopAt?.(current)) return { url: current, status: 0, body: '' };
      const answer = await request(current);
      if (answer.status >= 300 && answer.status < 400 && answer.location) {
        current = answer.location;
        continue;
      }
      return { url: current, ...answer };
    }
    throw new Error('too many redirects');
  }

  /** Posts a form and follows where it leads. */
  async function submit(url: string, fields: Record<string, string>, stopAt?: (url: string) => boolean) {
    const answer = await request(url, { method: 'POST', body: new URLSearchParams(fields).toString() });
    if (answer.status >= 300 && answer.status < 400 && answer.location) return follow(answer.location, stopAt);
    return { url, ...answer };
  }

  /** The cookie jar of one origin (created empty), for a test to read or plant cookies. */
  return { request, follow, submit, cookies: (origin: string) => jarOf(new URL(origin)) };
}
