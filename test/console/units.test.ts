import { describe, expect, it } from 'vitest';
import { escapeHtml, html, trusted } from '../../src/console/html.js';
import { formatRemaining } from '../../src/console/layout.js';
import { safeReturn } from '../../src/console/respond.js';
import { LINK_TTL_MS, checkLink, csrfTokenFor, csrfTokenMatches, sessionIsLive, webIdentity } from '../../src/console/sign-in.js';
import { publicBaseUrl, servedOverHttps, signInUrl } from '../../src/console/urls.js';

describe('html templates', () => {
  it('escape every interpolated value, including quotes and backticks for attributes', () => {
    const hostile = `<script>alert('x')</script>" onmouseover="1\``;
    const out = html`<p title="${hostile}">${hostile}</p>`.value;
    expect(out).toBe(
      '<p title="&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot; onmouseover=&quot;1&#96;">&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot; onmouseover=&quot;1&#96;</p>',
    );
    expect(escapeHtml('a & b')).toBe('a &amp; b');
  });

  it('nest templates and arrays without double escaping, and drop null, undefined and false', () => {
    const items = ['<a>', '<b>'].map((item) => html`<li>${item}</li>`);
    expect(html`<ul>${items}${null}${undefined}${false}</ul>`.value).toBe('<ul><li>&lt;a&gt;</li><li>&lt;b&gt;</li></ul>');
    expect(html`${trusted('<br />')}`.value).toBe('<br />');
  });
});

describe('the return address of a console form', () => {
  it.each([
    ['/console', '/console'],
    ['/console/proposals/prp_1', '/console/proposals/prp_1'],
    ['/console/history?status=committed', '/console/history?status=committed'],
    ['/console/./grants', '/console/grants'],
    ['/console#pending', '/console'],
  ])('keeps %s inside the console as %s', (given, kept) => {
    expect(safeReturn(given)).toBe(kept);
  });

  it.each([
    ['/console/../../evil'],
    ['/console/../evil'],
    ['/console/%2e%2e/evil'],
    ['/console/.%2E/evil'],
    ['/console/%2fevil'],
    ['//evil.example/console'],
    ['/console//evil.example'],
    ['/\\evil.example/console'],
    ['/console\\..\\..\\evil'],
    ['/console/\t/evil'],
    ['https://evil.example/console'],
    ['javascript:alert(1)//console'],
    ['/consoleevil'],
    ['console/proposals'],
    [''],
    [undefined],
  ])('sends %s to /console: it is not a path under /console/ once resolved, or it is ambiguous', (given) => {
    expect(safeReturn(given)).toBe('/console');
  });
});

describe('sign-in rules', () => {
  const created = new Date('2026-11-22T10:00:00.000Z');
  const link = { tokenHash: 'h', approver: 'web:operator', createdAt: created, expiresAt: new Date(created.getTime() + LINK_TTL_MS), usedAt: null };

  it('a link is good until its expiry, exclusive', () => {
    expect(checkLink(link, new Date(created.getTime() + LINK_TTL_MS - 1))).toMatchObject({ ok: true, approver: 'web:operator' });
    expect(checkLink(link, new Date(created.getTime() + LINK_TTL_MS))).toEqual({ ok: false, problem: 'expired' });
    expect(checkLink({ ...link, usedAt: created }, created)).toEqual({ ok: false, problem: 'used' });
    expect(checkLink(null, created)).toEqual({ ok: false, problem: 'unknown' });
  });

  it('a session is live until its expiry or revocation', () => {
    const session = { idHash: 'h', approver: 'web:operator', groups: null, createdAt: created, expiresAt: new Date(created.getTime() + 1000), revokedAt: null };
    expect(sessionIsLive(session, new Date(created.getTime() + 999))).toBe(true);
    expect(sessionIsLive(session, new Date(created.getTime() + 1000))).toBe(false);
    expect(sessionIsLive({ ...session, revokedAt: created }, created)).toBe(false);
    expect(sessionIsLive(null, created)).toBe(false);
  });

  it('the CSRF token is bound to one session secret', () => {
    const token = csrfTokenFor('secret-one');
    const session = { approver: 'web:a', groups: [], idHash: 'h', expiresAt: created, csrfToken: token };
    expect(csrfTokenMatches(session, token)).toBe(true);
    expect(csrfTokenMatches(session, csrfTokenFor('secret-two'))).toBe(false);
    expect(csrfTokenMatches(session, undefined)).toBe(false);
    expect(csrfTokenMatches(session, token.toUpperCase())).toBe(false);
  });

  it('names approvers web:NAME', () => {
    expect(webIdentity('operator')).toBe('web:operator');
    expect(webIdentity('web:ops.team@acme')).toBe('web:ops.team@acme');
    expect(() => webIdentity('slack:U123')).toThrow('approver name');
    expect(() => webIdentity('')).toThrow('approver name');
  });
});

describe('console URLs', () => {
  it('use TWOKEY_PUBLIC_URL when set, else a reachable listen address', () => {
    expect(publicBaseUrl({ TWOKEY_PUBLIC_URL: 'https://twokey.example.com/ignored/', HOST: '0.0.0.0', PORT: 8080 })).toBe('https://twokey.example.com');
    expect(publicBaseUrl({ HOST: '127.0.0.1', PORT: 8080 })).toBe('http://127.0.0.1:8080');
    expect(publicBaseUrl({ HOST: '0.0.0.0', PORT: 9000 })).toBe('http://localhost:9000');
    expect(publicBaseUrl({ HOST: '::1', PORT: 9000 })).toBe('http://[::1]:9000');
    expect(publicBaseUrl({ HOST: '0.0.0.0', PORT: 0 }, 'http://0.0.0.0:41234')).toBe('http://localhost:41234');
    expect(signInUrl('http://127.0.0.1:8080', 'tk_link_abc')).toBe('http://127.0.0.1:8080/console/login?token=tk_link_abc');
    expect(servedOverHttps({ TWOKEY_PUBLIC_URL: 'https://x.example' })).toBe(true);
    expect(servedOverHttps({})).toBe(false);
  });

  it('countdowns read well at every scale', () => {
    expect(formatRemaining(0)).toBe('expired');
    expect(formatRemaining(59_999)).toBe('59 s left');
    expect(formatRemaining(299_000)).toBe('4 min 59 s left');
    expect(formatRemaining(3 * 3_600_000 + 60_000)).toBe('3 h 1 min left');
    expect(formatRemaining(5 * 86_400_000)).toBe('5 days left');
  });
});
