import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityFromClaims } from '../../src/console/oidc.js';
import { drivers } from '../support/database.js';
import { cookieBrowser, startTestIssuer, type TestIssuer } from '../support/oidc-issuer.js';
import { configYaml, upgradePlanOperation } from '../support/operations.js';
import { freePort } from '../support/processes.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const CALLBACK = '/console/auth/callback';

describe.each(drivers)('console sign-in with an OpenID Connect issuer (%s)', (driver) => {
  let issuer: TestIssuer;
  let twokey: TestTwokey;
  let base: string;
  let apiKey: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    issuer = await startTestIssuer({ redirectUri: `${base}${CALLBACK}`, groups: { alice: ['approvers'], dave: ['approvers'], erin: [] } });
    const yaml = configYaml(
      [upgradePlanOperation({ approvers: ['oidc:group:approvers', 'web:alice'], quorum: 2, commit: 'agent' })],
      `
console:
  oidc:
    issuer: ${issuer.issuer}
    name: Test issuer
    clientId: ${issuer.clientId}
    scopes: [openid, email, groups]
    groupsClaim: groups
people:
  - name: alice
    identities: [web:alice, oidc:alice]
  - name: dave
    identities: [web:dave, oidc:dave]
`,
    );
    twokey = await startTestTwokey({
      driver,
      configYaml: yaml,
      configVars: { TWOKEY_OIDC_CLIENT_SECRET: issuer.clientSecret },
      listen: true,
      env: { HOST: '127.0.0.1', PORT: String(port) },
    });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:dave'] }));
  });
  afterAll(async () => {
    await twokey?.close();
    await issuer?.close();
  });

  /**
   * Runs the flow up to the issuer's redirect back to twokey, as `login`: twokey's redirect to the
   * issuer, its login and consent pages. Returns the callback URL (not yet opened) and the browser.
   */
  async function throughIssuer(login: string) {
    const browser = cookieBrowser();
    const atCallback = (url: string) => url.startsWith(`${base}${CALLBACK}`);
    let step = await browser.follow(`${base}/console/login?with=oidc`, atCallback);
    for (let pages = 0; pages < 4 && !atCallback(step.url); pages++) {
      const prompt = /name="prompt" value="(login|consent)"/.exec(step.body)?.[1];
      if (!prompt) throw new Error(`unexpected issuer page at ${step.url}: ${step.body.slice(0, 200)}`);
      step = await browser.submit(step.url, prompt === 'login' ? { prompt, login, password: 'any' } : { prompt }, atCallback);
    }
    expect(step.url.startsWith(`${base}${CALLBACK}?`)).toBe(true);
    return { browser, callback: step.url };
  }

  /** Opens the console with the browser's twokey cookies (SameSite=Strict rides on a same-site navigation). */
  const consolePage = (browser: ReturnType<typeof cookieBrowser>) => browser.request(`${base}/console`);

  it('the sign-in page offers the issuer; the code flow ends in a session of the person the issuer named', async () => {
    const signInPage = await cookieBrowser().request(`${base}/console/login`);
    expect(signInPage.body).toContain('Sign in with Test issuer');
    expect(signInPage.body).toContain('twokey approvers link');

    const start = await cookieBrowser().request(`${base}/console/login?with=oidc`);
    expect(start.status).toBe(303);
    const authorize = new URL(start.location ?? '');
    expect(authorize.origin).toBe(issuer.issuer);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${base}${CALLBACK}`);
    for (const name of ['state', 'nonce', 'code_challenge']) expect(authorize.searchParams.get(name)).toMatch(/^[A-Za-z0-9_-]{20,}$/);

    const { browser, callback } = await throughIssuer('alice');
    const signedIn = await browser.request(callback);
    expect(signedIn.status).toBe(200);
    expect(signedIn.body).toContain('oidc:alice');
    const page = await consolePage(browser);
    expect(page.status).toBe(200);
    expect(page.body).toContain('Signed in as');
    expect(page.body).toContain('oidc:alice');
    // The flow cookie is spent; only the session stays.
    expect([...browser.cookies(base).keys()]).toEqual(['twokey_session']);
    expect(twokey.logs.join('')).toContain('"via":"oidc"');
    // The request log shows the callback, never its authorization code.
    const code = new URL(callback).searchParams.get('code') ?? '';
    expect(code.length).toBeGreaterThan(10);
    expect(twokey.logs.join('')).toContain('/console/auth/callback?code=[REDACTED]');
    expect(twokey.logs.join('')).not.toContain(code);
  });

  it('a person counts once in a quorum across their issuer and link identities, and the owner ban covers both', async () => {
    const proposal = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } } });
    const id = (proposal.body as { id: string }).id;
    const approve = async (browser: ReturnType<typeof cookieBrowser>) => {
      const page = await browser.request(`${base}/console/proposals/${id}`);
      const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(page.body)?.[1] ?? '';
      return browser.request(`${base}/console/proposals/${id}/approve`, { method: 'POST', body: new URLSearchParams({ _csrf: csrf }).toString() });
    };

    // dave owns the agent as web:dave; signed in as oidc:dave (in the approvers group) he is still the owner.
    const dave = await throughIssuer('dave');
    await dave.browser.request(dave.callback);
    const refused = await approve(dave.browser);
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('You own the agent');

    // alice approves through the issuer's group, then again with a one-time link as web:alice: one person, one key.
    const alice = await throughIssuer('alice');
    await alice.browser.request(alice.callback);
    expect((await approve(alice.browser)).status).toBe(303);
    const { token } = await twokey.webConsole.auth.mintLink('alice');
    const linkBrowser = cookieBrowser();
    expect((await linkBrowser.request(`${base}/console/login`, { method: 'POST', body: new URLSearchParams({ token }).toString() })).status).toBe(303);
    const again = await approve(linkBrowser);
    expect(again.location).toContain('done=already');
    const approvals = await twokey.services.store.listApprovals(id);
    expect(approvals.map((approval) => approval.approver)).toEqual(['oidc:alice']);
    expect(approvals[0]?.matchedRule).toBe('oidc:group:approvers');
  });

  it('a callback with a wrong state, nonce, PKCE verifier or code, or without its flow cookie, opens no session', async () => {
    const tamperings: Array<(callback: URL, flow: Record<string, unknown>) => void> = [
      (callback) => callback.searchParams.set('state', 'x'.repeat(43)),
      (callback) => callback.searchParams.set('code', 'not-a-code'),
      (_callback, flow) => (flow.nonce = 'y'.repeat(43)),
      (_callback, flow) => (flow.verifier = 'z'.repeat(43)),
    ];
    for (const tamper of tamperings) {
      const { browser, callback } = await throughIssuer('erin');
      const jar = browser.cookies(base);
      const flow = JSON.parse(Buffer.from(jar.get('twokey_oidc') ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
      const url = new URL(callback);
      tamper(url, flow);
      jar.set('twokey_oidc', Buffer.from(JSON.stringify(flow)).toString('base64url'));
      const answer = await browser.request(url.toString());
      expect(answer.status).toBe(403);
      expect(answer.body).toContain('Sign-in with Test issuer refused');
      expect(jar.has('twokey_session')).toBe(false);
      expect((await consolePage(browser)).status).toBe(303);
    }

    // Without the flow cookie (another browser, or a link from someone else) the callback is refused too.
    const { callback } = await throughIssuer('erin');
    const stranger = cookieBrowser();
    const answer = await stranger.request(callback);
    expect(answer.status).toBe(403);
    expect(answer.body).toContain('did not start here');
    expect(stranger.cookies(base).has('twokey_session')).toBe(false);

    // A code is good once: the same callback replayed with its flow cookie is refused by the issuer.
    const first = await throughIssuer('erin');
    const flowCookie = first.browser.cookies(base).get('twokey_oidc') ?? '';
    expect((await first.browser.request(first.callback)).status).toBe(200);
    const replay = cookieBrowser();
    replay.cookies(base).set('twokey_oidc', flowCookie);
    const replayed = await replay.request(first.callback);
    expect(replayed.status).toBe(403);
    expect(replayed.body).toContain('could not be verified');
    expect(replay.cookies(base).has('twokey_session')).toBe(false);
  });
});

describe('the identity an issuer gives', () => {
  const config = { identityClaim: 'email', groupsClaim: 'groups' };

  it('reads the configured claim, refuses an unverified email and a group-shaped value, keeps valid group names', () => {
    expect(identityFromClaims({ sub: '1', email: 'ann@example.com', email_verified: true, groups: ['a', 'a', 'b c', 7] }, config)).toEqual({
      ok: true,
      identity: 'oidc:ann@example.com',
      groups: ['a'],
    });
    expect(identityFromClaims({ email: 'ann@example.com', email_verified: false }, config)).toMatchObject({ ok: false, problem: 'unverified-email' });
    expect(identityFromClaims({ sub: '1' }, config)).toMatchObject({ ok: false, problem: 'no-identity' });
    expect(identityFromClaims({ sub: 'group:admins' }, { identityClaim: 'sub', groupsClaim: null })).toMatchObject({ ok: false, problem: 'no-identity' });
    expect(identityFromClaims({ sub: 'x'.repeat(256) }, { identityClaim: 'sub', groupsClaim: null })).toMatchObject({ ok: false, problem: 'no-identity' });
    expect(identityFromClaims({ sub: '248289761001', groups: 'solo' }, { identityClaim: 'sub', groupsClaim: 'groups' })).toEqual({
      ok: true,
      identity: 'oidc:248289761001',
      groups: ['solo'],
    });
  });
});
