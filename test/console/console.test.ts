import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY, LINK_TTL_MS, SESSION_TTL_MS } from '../../src/console/index.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { csrfOf, startConsoleTwokey, type ConsoleTwokey } from './support.js';

const linkOf = (url: string) => new URL(url).searchParams.get('token') ?? '';

describe.each(drivers)('web console over HTTP (%s)', (driver) => {
  const clock = manualClock();
  let twokey: ConsoleTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver, clock });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:reviewer'] }));
  });
  afterAll(() => twokey.close());

  describe('security headers', () => {
    it('every page carries a strict CSP, no framing, no referrer, and is not cached', async () => {
      for (const url of ['/console/login', '/console/login?token=tk_link_nope', '/console/nowhere']) {
        const response = await twokey.page(url);
        expect(response.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
        expect(response.headers['x-frame-options']).toBe('DENY');
        expect(response.headers['referrer-policy']).toBe('no-referrer');
        expect(response.headers['x-content-type-options']).toBe('nosniff');
        expect(response.headers['cache-control']).toBe('no-store');
      }
      expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
      expect(CONTENT_SECURITY_POLICY).toContain("frame-ancestors 'none'");
      expect(CONTENT_SECURITY_POLICY).not.toContain('unsafe-inline');
      const { body } = await twokey.page('/console/login');
      expect(body).not.toMatch(/<script(?![^>]*\ssrc=)/);
      expect(body).not.toMatch(/\sstyle=/);
    });

    it('serves its stylesheet and script from /console/assets', async () => {
      const css = await twokey.page('/console/assets/console.css');
      expect(css.status).toBe(200);
      expect(css.headers['content-type']).toContain('text/css');
      const js = await twokey.page('/console/assets/console.js');
      expect(js.headers['content-type']).toContain('text/javascript');
      expect((await twokey.page('/console/assets/../../package.json')).status).toBe(404);
    });
  });

  describe('sign-in links', () => {
    it('signs in once: HttpOnly, SameSite=Strict session cookie on /console, then a redirect without the token', async () => {
      const { token } = await twokey.web.auth.mintLink('operator');
      expect(token).toMatch(/^tk_link_[A-Za-z0-9_-]{43}$/);

      // Opening the link only asks; a chat preview fetching it does not spend it.
      const ask = await twokey.page(`/console/login?token=${token}`);
      expect(ask.status).toBe(200);
      expect(ask.body).toContain('Sign in as web:operator');
      expect((await twokey.page(`/console/login?token=${token}`)).status).toBe(200);

      const signedIn = await twokey.form('/console/login', { token });
      expect(signedIn.status).toBe(303);
      expect(signedIn.headers.location).toBe('/console?done=signed-in');
      const setCookie = String(signedIn.headers['set-cookie']);
      expect(setCookie).toMatch(/^twokey_session=[A-Za-z0-9_-]{43};/);
      expect(setCookie).toContain('HttpOnly');
      expect(setCookie).toContain('SameSite=Strict');
      expect(setCookie).toContain('Path=/console');
      expect(setCookie).toContain(`Max-Age=${SESSION_TTL_MS / 1000}`);
      expect(setCookie).not.toContain('Secure');

      const reused = await twokey.form('/console/login', { token });
      expect(reused.status).toBe(403);
      expect(reused.body).toContain('already used');
      expect(reused.headers['set-cookie']).toBeUndefined();
      expect((await twokey.page(`/console/login?token=${token}`)).body).toContain('already used');
      // The token travelled in a URL and a form: the logs never show it, nor the session secret.
      const secret = setCookie.slice('twokey_session='.length, setCookie.indexOf(';'));
      expect(twokey.logs.join('')).toContain('/console/login?token=[REDACTED]');
      expect(twokey.logs.join('')).not.toContain(token);
      expect(twokey.logs.join('')).not.toContain(secret);
    });

    it('signing in again ends the session the browser had', async () => {
      const first = await twokey.signIn('operator');
      const { token } = await twokey.web.auth.mintLink('reviewer');
      const again = await twokey.form('/console/login', { token }, { cookie: first.cookie });
      expect(again.status).toBe(303);
      expect((await twokey.page('/console', first.cookie)).status).toBe(303);
    });

    it('a link works until 10 minutes, not a millisecond more', async () => {
      const fresh = await twokey.web.auth.mintLink('operator');
      const late = await twokey.web.auth.mintLink('operator');
      clock.advance(LINK_TTL_MS - 1);
      expect((await twokey.form('/console/login', { token: fresh.token })).status).toBe(303);
      clock.advance(1);
      const expired = await twokey.form('/console/login', { token: late.token });
      expect(expired.status).toBe(403);
      expect(expired.body).toContain('expired');
    });

    it('refuses made-up and malformed tokens, and a sign-in posted from another site', async () => {
      expect((await twokey.form('/console/login', { token: `tk_link_${'A'.repeat(43)}` })).status).toBe(403);
      expect((await twokey.form('/console/login', { token: 'nope' })).status).toBe(403);
      const { token } = await twokey.web.auth.mintLink('operator');
      const forged = await twokey.form('/console/login', { token }, { headers: { origin: 'https://evil.example' } });
      expect(forged.status).toBe(403);
      expect((await twokey.form('/console/login', { token })).status).toBe(303);
    });

    it('pages without a session send the person to the sign-in page', async () => {
      const response = await twokey.page('/console');
      expect(response.status).toBe(303);
      expect(response.headers.location).toBe('/console/login');
      expect((await twokey.page('/console', 'twokey_session=not-a-session')).status).toBe(303);
      expect((await twokey.page('/console/fragments/pending')).status).toBe(401);
      expect((await twokey.page('/console/events')).status).toBe(401);
    });

    it('audits link, sign-in and sign-out in the hash chain', async () => {
      const { cookie, csrf } = await twokey.signIn('auditor');
      const out = await twokey.form('/console/logout', { _csrf: csrf }, { cookie });
      expect(out.status).toBe(200);
      expect(String(out.headers['set-cookie'])).toMatch(/twokey_session=;.*Expires=Thu, 01 Jan 1970/);
      const events = await twokey.services.audit.list({ limit: 1000 });
      const mine = events.filter((event) => event.actor === 'web:auditor' || event.data.approver === 'web:auditor');
      expect(mine.map((event) => event.type)).toEqual(['console.link_created', 'console.signed_in', 'console.signed_out']);
      expect(JSON.stringify(mine)).not.toContain('tk_link_');
      expect(await twokey.services.audit.verify()).toMatchObject({ ok: true });
    });
  });

  describe('sessions', () => {
    it('expire after 12 hours', async () => {
      const { cookie } = await twokey.signIn('operator');
      clock.advance(SESSION_TTL_MS - 1);
      expect((await twokey.page('/console', cookie)).status).toBe(200);
      clock.advance(1);
      expect((await twokey.page('/console', cookie)).status).toBe(303);
    });

    it('end at sign-out: the old cookie no longer works', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      expect((await twokey.form('/console/logout', { _csrf: csrf }, { cookie })).status).toBe(200);
      expect((await twokey.page('/console', cookie)).status).toBe(303);
    });

    it('are revoked with `approvers revoke-sessions`, with the unused links of that person', async () => {
      const first = await twokey.signIn('operator');
      const second = await twokey.signIn('operator');
      const other = await twokey.signIn('reviewer');
      const { token } = await twokey.web.auth.mintLink('operator');
      const revoked = await runAdminOperation(twokey.services, 'approvers.revoke-sessions', { name: 'operator' });
      expect(revoked).toMatchObject({ approver: 'web:operator', sessions: expect.any(Number), links: 1 });
      expect((await twokey.page('/console', first.cookie)).status).toBe(303);
      expect((await twokey.page('/console', second.cookie)).status).toBe(303);
      expect((await twokey.page('/console', other.cookie)).status).toBe(200);
      expect((await twokey.form('/console/login', { token })).status).toBe(403);
    });

    it('are revoked for a person the issuer signed in, by their oidc: identity', async () => {
      const { secret } = await twokey.web.auth.signInVerified('oidc:alice', ['approvers'], 'https://issuer.example.test');
      expect(await twokey.web.auth.authenticate(secret)).toMatchObject({ approver: 'oidc:alice' });
      const revoked = await runAdminOperation(twokey.services, 'approvers.revoke-sessions', { name: 'oidc:alice' });
      expect(revoked).toMatchObject({ approver: 'oidc:alice', sessions: 1, links: 0 });
      expect(await twokey.web.auth.authenticate(secret)).toBeNull();
      await expect(runAdminOperation(twokey.services, 'approvers.revoke-sessions', { name: 'oidc:group:approvers' })).rejects.toThrow('oidc:VALUE');
    });

    it('`approvers link` mints a link for web:NAME at the base URL it is given', async () => {
      const result = (await runAdminOperation(twokey.services, 'approvers.link', { name: 'web:operator', baseUrl: 'https://twokey.example.com' })) as {
        url: string;
        approver: string;
        decides: string[];
      };
      expect(result.approver).toBe('web:operator');
      expect(result.decides).toEqual(['upgrade_plan', 'send_mailing', 'delete_workspace']);
      expect(result.url).toMatch(/^https:\/\/twokey\.example\.com\/console\/login\?token=tk_link_[A-Za-z0-9_-]{43}$/);
      expect((await twokey.form('/console/login', { token: linkOf(result.url) })).status).toBe(303);
      await expect(runAdminOperation(twokey.services, 'approvers.link', { name: 'bad name!' })).rejects.toThrow('approver name');
    });
  });

  describe('decisions and CSRF', () => {
    it('approves with a valid form; the proposal commits', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'scale' });
      const pending = await twokey.page('/console', cookie);
      expect(pending.body).toContain(proposal.summary);
      expect(pending.body).toContain(`action="/console/proposals/${proposal.id}/approve"`);

      const approved = await twokey.form(`/console/proposals/${proposal.id}/approve`, { _csrf: csrf, return: '/console' }, { cookie });
      expect(approved.status).toBe(303);
      expect(approved.headers.location).toBe(`/console?done=approve&id=${proposal.id}`);
      expect((await twokey.services.proposals.get(proposal.id)).status).toBe('committed');
      // The chain and its checkpoint are placed off the hot path: have them placed and signed now.
      await twokey.audit.flush();

      const page = await twokey.page(`/console/proposals/${proposal.id}`, cookie);
      expect(page.body).toContain('Committed');
      expect(page.body).toContain('Executor result');
      expect(page.body).toContain('&quot;echoed&quot;: true');
      expect(page.body).toContain('Audit chain intact');
    });

    it('a form without the CSRF token, with a wrong one, or with another session’s is refused with 403 and changes nothing', async () => {
      const { cookie } = await twokey.signIn('operator');
      const other = await twokey.signIn('reviewer');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
      const url = `/console/proposals/${proposal.id}/approve`;
      const attempts: Array<Record<string, string>> = [{}, { _csrf: '' }, { _csrf: 'f'.repeat(64) }, { _csrf: other.csrf }];
      for (const fields of attempts) {
        const response = await twokey.form(url, fields, { cookie });
        expect(response.status).toBe(403);
        expect(response.body).toContain('Nothing was changed');
      }
      const rejectWithoutToken = await twokey.form(`/console/proposals/${proposal.id}/reject`, { reason: 'no' }, { cookie });
      expect(rejectWithoutToken.status).toBe(403);
      expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
      expect(await twokey.services.store.listApprovals(proposal.id)).toEqual([]);
    });

    it('a right token from another site is refused too (Origin / Sec-Fetch-Site)', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
      const url = `/console/proposals/${proposal.id}/approve`;
      expect((await twokey.form(url, { _csrf: csrf }, { cookie, headers: { origin: 'https://evil.example' } })).status).toBe(403);
      expect((await twokey.form(url, { _csrf: csrf }, { cookie, headers: { 'sec-fetch-site': 'cross-site' } })).status).toBe(403);
      expect((await twokey.form(url, { _csrf: csrf }, { cookie, headers: { 'sec-fetch-site': 'same-site' } })).status).toBe(403);
      // A page under Referrer-Policy no-referrer posts with Origin: null; the browser still says same-origin.
      expect((await twokey.form(url, {}, { cookie, headers: { origin: 'null', 'sec-fetch-site': 'same-origin' } })).status).toBe(403);
      expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
      expect((await twokey.form(url, { _csrf: csrf }, { cookie, headers: { origin: 'null', 'sec-fetch-site': 'same-origin' } })).status).toBe(303);
    });

    it('a form without a session is refused with 401', async () => {
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
      expect((await twokey.form(`/console/proposals/${proposal.id}/approve`, { _csrf: 'f'.repeat(64) })).status).toBe(401);
      expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
    });

    it('a non-approver sees no buttons, and their forged post is refused', async () => {
      const { cookie, csrf } = await twokey.signIn('mallory');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'enterprise' });
      for (const url of ['/console', `/console/proposals/${proposal.id}`]) {
        const page = await twokey.page(url, cookie);
        expect(page.body).toContain(proposal.summary);
        expect(page.body).not.toContain(`/console/proposals/${proposal.id}/approve`);
        expect(page.body).not.toContain(`/console/proposals/${proposal.id}/reject`);
        expect(page.body).toContain('not an approver of upgrade_plan');
      }
      const forged = await twokey.form(`/console/proposals/${proposal.id}/approve`, { _csrf: csrf }, { cookie });
      expect(forged.status).toBe(403);
      expect(forged.body).toContain('not an approver');
      const forgedReject = await twokey.form(`/console/proposals/${proposal.id}/reject`, { _csrf: csrf, reason: 'mine' }, { cookie });
      expect(forgedReject.status).toBe(403);
      expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
      expect(await twokey.services.store.listApprovals(proposal.id)).toEqual([]);
    });

    it('an owner of the agent sees no buttons and cannot decide (no self-approval)', async () => {
      const { cookie, csrf } = await twokey.signIn('reviewer');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'own', plan: 'pro' });
      const page = await twokey.page(`/console/proposals/${proposal.id}`, cookie);
      expect(page.body).not.toContain(`/console/proposals/${proposal.id}/approve`);
      expect(page.body).toContain('You own the agent argus');
      const forged = await twokey.form(`/console/proposals/${proposal.id}/approve`, { _csrf: csrf }, { cookie });
      expect(forged.status).toBe(403);
      expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
    });

    it('rejects with a reason the agent sees; a second decision says it is no longer pending', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'scale' });
      const rejected = await twokey.form(
        `/console/proposals/${proposal.id}/reject`,
        { _csrf: csrf, reason: 'not this quarter', return: `/console/proposals/${proposal.id}` },
        { cookie },
      );
      expect(rejected.status).toBe(303);
      const view = await twokey.request('GET', `/v1/proposals/${proposal.id}`, { apiKey });
      expect(view.body).toMatchObject({ status: 'rejected', decision: { by: 'web:operator', reason: 'not this quarter' } });
      const late = await twokey.form(`/console/proposals/${proposal.id}/approve`, { _csrf: csrf }, { cookie });
      expect(late.status).toBe(409);
      expect(late.body).toContain('no longer pending');
    });

    it('counts a double click once and shows n of m on a quorum of two', async () => {
      const operator = await twokey.signIn('operator');
      const proposal = await twokey.propose(apiKey, 'delete_workspace', { workspace: 'old' });
      const url = `/console/proposals/${proposal.id}/approve`;
      expect((await twokey.form(url, { _csrf: operator.csrf }, { cookie: operator.cookie })).headers.location).toContain('done=approve');
      expect((await twokey.form(url, { _csrf: operator.csrf }, { cookie: operator.cookie })).headers.location).toContain('done=already');
      const page = await twokey.page(`/console/proposals/${proposal.id}`, operator.cookie);
      expect(page.body).toContain('1 of 2: web:operator');
      expect(page.body).toContain('You approved; waiting for 1 more.');
      expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
    });

    it('a forged return address cannot redirect off the console', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'scale' });
      const response = await twokey.form(`/console/proposals/${proposal.id}/reject`, { _csrf: csrf, return: '//evil.example/console' }, { cookie });
      expect(response.headers.location).toBe(`/console?done=reject&id=${proposal.id}`);
      // A path that starts under /console/ and climbs out of it once resolved.
      const climbing = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
      const climbed = await twokey.form(`/console/proposals/${climbing.id}/approve`, { _csrf: csrf, return: '/console/../../evil' }, { cookie });
      expect(climbed.headers.location).toBe(`/console?done=approve&id=${climbing.id}`);
    });
  });

  describe('HTML escaping', () => {
    it('escapes a hostile summary, params and reason everywhere they are shown', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const hostile = '<script>alert(1)</script>';
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: hostile, plan: 'pro' });
      await twokey.form(`/console/proposals/${proposal.id}/reject`, { _csrf: csrf, reason: '"><img src=x onerror=alert(2)>' }, { cookie });
      const other = await twokey.propose(apiKey, 'send_mailing', { list: `'"><b>x</b>`, subject: '<svg onload=alert(3)>', recipients: 3 });
      const pages = [
        await twokey.page(`/console/proposals/${proposal.id}`, cookie),
        await twokey.page(`/console/proposals/${other.id}`, cookie),
        await twokey.page('/console', cookie),
        await twokey.page('/console/fragments/pending', cookie),
        await twokey.page('/console/history', cookie),
      ];
      for (const page of pages) {
        expect(page.body).not.toContain('<script>alert');
        expect(page.body).not.toContain('<img src=x');
        expect(page.body).not.toContain('<svg');
        expect(page.body).not.toContain('<b>x</b>');
      }
      expect(pages[0]?.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
      expect(pages[0]?.body).toContain('&quot;&gt;&lt;img src=x onerror=alert(2)&gt;');
      expect(pages[2]?.body).toContain('&lt;svg onload=alert(3)&gt;');
    });

    it('shows a param as one value: no forged lines, bidi or zero-width characters, a warning on mixed scripts', async () => {
      const { cookie } = await twokey.signIn('operator');
      const forged = 'invoice 42\n\nCost: $1.00 (one dollar)\nApproved by security team ✅ \u202Eexe\u200B \u0410cme';
      const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: forged, plan: 'pro' });
      const shown = 'invoice 42⏎⏎Cost: $1.00 (one dollar)⏎Approved by security team ✅ [U+202E]exe[U+200B] \u0410cme [⚠ mixed scripts: Cyrillic + Latin]';
      for (const url of [`/console/proposals/${proposal.id}`, '/console', '/console/fragments/pending']) {
        const page = await twokey.page(url, cookie);
        const summaries = [...page.body.matchAll(/class="summary"[^>]*>(?:<a [^>]*>)?([^<]*)/g)].map((match) => match[1] ?? '');
        const ours = summaries.filter((text) => text.includes('invoice 42'));
        expect(ours.length).toBeGreaterThan(0);
        for (const text of ours) {
          expect(text).toContain(shown);
          expect(text).not.toMatch(/[\n\r\u202E\u200B]/);
        }
      }
    });

    it('escapes the history filters it echoes back', async () => {
      const { cookie } = await twokey.signIn('operator');
      const page = await twokey.page(`/console/history?approver=${encodeURIComponent('"><script>x</script>')}&status=%3Cb%3E`, cookie);
      expect(page.status).toBe(400);
      expect(page.body).not.toContain('<script>x');
      expect(page.body).not.toContain('<b>');
      expect(page.body).toContain('value="&quot;&gt;&lt;script&gt;x&lt;/script&gt;"');
    });
  });

  describe('pages', () => {
    it('history filters by status, operation, agent, approver and creation day', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const { apiKey: otherKey } = await twokey.createAgent('hermes');
      const mailing = await twokey.propose(otherKey, 'send_mailing', { list: 'news', subject: 'Hello', recipients: 12 });
      await twokey.form(`/console/proposals/${mailing.id}/approve`, { _csrf: csrf }, { cookie });
      const ids = (html: string) => [...html.matchAll(/href="\/console\/proposals\/(prp_[^"]+)"/g)].map((m) => m[1]);

      expect(ids((await twokey.page('/console/history?agent=hermes', cookie)).body)).toEqual([mailing.id]);
      expect(ids((await twokey.page('/console/history?operation=send_mailing', cookie)).body)).toContain(mailing.id);
      expect(ids((await twokey.page('/console/history?operation=upgrade_plan', cookie)).body)).not.toContain(mailing.id);
      expect(ids((await twokey.page('/console/history?status=committed&agent=hermes', cookie)).body)).toEqual([mailing.id]);
      expect(ids((await twokey.page('/console/history?status=pending&agent=hermes', cookie)).body)).toEqual([]);
      expect(ids((await twokey.page('/console/history?approver=web:operator&agent=hermes', cookie)).body)).toEqual([mailing.id]);
      expect(ids((await twokey.page('/console/history?approver=web:reviewer&agent=hermes', cookie)).body)).toEqual([]);
      expect(ids((await twokey.page('/console/history?approver=operator&agent=hermes', cookie)).body)).toEqual([mailing.id]);
      const day = clock().toISOString().slice(0, 10);
      const nextDay = new Date(clock().getTime() + 86_400_000).toISOString().slice(0, 10);
      expect(ids((await twokey.page(`/console/history?agent=hermes&from=${day}&to=${day}`, cookie)).body)).toEqual([mailing.id]);
      expect(ids((await twokey.page(`/console/history?agent=hermes&from=${nextDay}`, cookie)).body)).toEqual([]);
      const bad = await twokey.page('/console/history?from=yesterday&agent=nobody', cookie);
      expect(bad.status).toBe(400);
      expect(bad.body).toContain('No agent is named');
      expect(bad.body).toContain('must be a date');
    });

    it('a proposal page shows its whole audit timeline and the chain state', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      const proposal = await twokey.propose(apiKey, 'send_mailing', { list: 'all', subject: 'Launch', recipients: 4000 });
      await twokey.form(`/console/proposals/${proposal.id}/approve`, { _csrf: csrf }, { cookie });
      await twokey.audit.flush();
      const page = await twokey.page(`/console/proposals/${proposal.id}`, cookie);
      for (const type of ['proposal.created', 'approval.recorded', 'proposal.approved', 'proposal.committed']) expect(page.body).toContain(type);
      expect(page.body).toMatch(/Audit chain intact<\/strong>: all \d+ events verified/);
      expect((await twokey.page('/console/proposals/prp_nothing', cookie)).status).toBe(404);
    });

    it('agents: an operator who approves everything the agent may do can revoke it; others cannot', async () => {
      const { apiKey: doomedKey } = await twokey.createAgent('doomed');
      const mallory = await twokey.signIn('mallory');
      const malloryPage = await twokey.page('/console/agents', mallory.cookie);
      expect(malloryPage.body).toContain('doomed');
      expect(malloryPage.body).not.toContain('/console/agents/doomed/revoke');
      const forged = await twokey.form('/console/agents/doomed/revoke', { _csrf: mallory.csrf }, { cookie: mallory.cookie });
      expect(forged.status).toBe(403);
      expect((await twokey.request('GET', '/v1/operations', { apiKey: doomedKey })).status).toBe(200);

      const owner = await twokey.signIn('reviewer');
      expect((await twokey.page('/console/agents', owner.cookie)).body).not.toContain('/console/agents/argus/revoke');

      const operator = await twokey.signIn('operator');
      const agents = await twokey.page('/console/agents', operator.cookie);
      expect(agents.body).toContain('action="/console/agents/doomed/revoke"');
      expect((await twokey.form('/console/agents/doomed/revoke', {}, { cookie: operator.cookie })).status).toBe(403);
      const revoked = await twokey.form('/console/agents/doomed/revoke', { _csrf: operator.csrf }, { cookie: operator.cookie });
      expect(revoked.status).toBe(303);
      expect((await twokey.request('GET', '/v1/operations', { apiKey: doomedKey })).status).toBe(401);
      const after = await twokey.page('/console/agents?done=revoked&agent=doomed', operator.cookie);
      expect(after.body).toContain('Revoked');
      const event = (await twokey.services.audit.list({ limit: 1000 })).find((e) => e.type === 'agent.revoked');
      expect(event).toMatchObject({ actor: 'web:operator', data: { name: 'doomed', via: 'web' } });
    });

    it('the CSRF token in a page is the session’s, and survives a reload', async () => {
      const { cookie, csrf } = await twokey.signIn('operator');
      expect(csrfOf((await twokey.page('/console/history', cookie)).body)).toBe(csrf);
    });
  });
});

describe('web console behind https', () => {
  let twokey: ConsoleTwokey;
  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver: 'pglite', env: { TWOKEY_PUBLIC_URL: 'https://twokey.example.com' } });
  });
  afterAll(() => twokey.close());

  it('marks the session cookie Secure (with the __Secure- prefix) and accepts forms from the public origin', async () => {
    const { token } = await twokey.web.auth.mintLink('operator');
    const response = await twokey.form('/console/login', { token }, { headers: { origin: 'https://twokey.example.com' } });
    expect(response.status).toBe(303);
    const setCookie = String(response.headers['set-cookie']);
    expect(setCookie).toMatch(/^__Secure-twokey_session=/);
    expect(setCookie).toContain('Secure');
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
  });

  it('the first-minute text names the console and a working link for web:operator', async () => {
    const text = await twokey.web.firstRunSignIn();
    expect(text).toContain('twokey web console: https://twokey.example.com/console');
    const url = /https:\/\/\S+token=tk_link_[A-Za-z0-9_-]{43}/.exec(text)?.[0] ?? '';
    expect(url).not.toBe('');
    const token = new URL(url).searchParams.get('token') ?? '';
    expect((await twokey.page(`/console/login?token=${token}`)).body).toContain('Sign in as web:operator');
  });
});
