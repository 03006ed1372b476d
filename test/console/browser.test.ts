import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINK_TTL_MS, signInUrl } from '../../src/console/index.js';
import { findChromium } from '../support/chromium.js';
import { csrfOf, startConsoleTwokey, type ConsoleTwokey } from './support.js';

const RESULTS = fileURLToPath(new URL('../../test-results/', import.meta.url));

describe('web console in a real browser', () => {
  let browser: Browser;
  let twokey: ConsoleTwokey;
  let operator: BrowserContext;
  let page: Page;
  let apiKey: string;
  /** Moves twokey's clock forward without stopping it, so expiry can be tested against live pages. */
  let skewMs = 0;

  beforeAll(async () => {
    await mkdir(RESULTS, { recursive: true });
    const found = await findChromium();
    [browser, twokey] = await Promise.all([
      chromium.launch({ executablePath: found.executablePath, args: found.args, headless: true }),
      startConsoleTwokey({ driver: 'pglite', listen: true, clock: () => new Date(Date.now() + skewMs) }),
    ]);
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:alice'] }));
    operator = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await operator.newPage();
    // The first run unpacks @sparticuz/chromium's 190 MB browser into the temp directory.
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await twokey?.close();
  });

  const linkFor = async (name: string) => signInUrl(twokey.baseUrl, (await twokey.web.auth.mintLink(name)).token);

  async function signInWith(target: Page, name: string): Promise<void> {
    await target.goto(await linkFor(name));
    await target.getByRole('button', { name: `Sign in as web:${name}` }).click();
    await target.waitForURL(`${twokey.baseUrl}/console?done=signed-in`);
  }

  it('signs in with a one-time link; the token leaves the address bar; the link is then spent', async () => {
    const link = await linkFor('operator');
    const shown = await page.goto(link);
    expect(shown?.status()).toBe(200);
    await page.screenshot({ path: `${RESULTS}console-signin.png` });
    await page.getByRole('button', { name: 'Sign in as web:operator' }).click();
    await page.waitForURL(`${twokey.baseUrl}/console?done=signed-in`);
    expect(page.url()).not.toContain('tk_link_');
    expect(await page.locator('.who').innerText()).toContain('web:operator');

    const cookies = await operator.cookies();
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ name: 'twokey_session', httpOnly: true, sameSite: 'Strict', path: '/console' });

    const other = await browser.newPage();
    const reused = await other.goto(link);
    expect(reused?.status()).toBe(403);
    expect(await other.locator('main').innerText()).toContain('already used');
    await other.close();
  });

  it('refuses an expired link', async () => {
    const link = await linkFor('operator');
    skewMs = LINK_TTL_MS;
    try {
      const other = await browser.newPage();
      const response = await other.goto(link);
      expect(response?.status()).toBe(403);
      expect(await other.locator('main').innerText()).toContain('expired');
      await other.close();
    } finally {
      skewMs = 0;
    }
  });

  it('shows a proposal made through the API without a reload', async () => {
    await page.goto(`${twokey.baseUrl}/console`);
    await page.locator('#pending-empty').waitFor();
    // No DOM types in this Node project: page code is passed as text.
    await page.evaluate('window.stillTheSamePage = true');

    const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'acme', plan: 'scale', amount_cents: 240000 });
    await page.locator(`#card-${proposal.id}`).waitFor({ timeout: 10_000 });
    expect(await page.evaluate('window.stillTheSamePage')).toBe(true);
    expect(await page.locator(`#card-${proposal.id} .summary`).innerText()).toBe('argus is requesting to upgrade acme to the scale plan.');
    expect(await page.locator('#pending-count').innerText()).toBe('1');
    expect(await page.locator(`#card-${proposal.id} .countdown`).innerText()).toMatch(/\d+ min \d+ s left/);
    expect(await page.locator(`#card-${proposal.id}`).getByRole('button', { name: 'Approve' }).count()).toBe(1);
  });

  it('looks right with several proposals pending (screenshot)', async () => {
    const mailing = await twokey.propose(apiKey, 'send_mailing', { list: 'customers-eu', subject: 'Our new pricing', recipients: 18250 });
    const deletion = await twokey.propose(apiKey, 'delete_workspace', { workspace: 'staging-2019' });
    await twokey.services.proposals.approve(deletion.id, { identity: 'web:reviewer', via: 'web' });
    await page.locator(`#card-${mailing.id}`).waitFor({ timeout: 10_000 });
    await page.locator(`#card-${deletion.id}`).getByText('1 of 2: web:reviewer').waitFor({ timeout: 10_000 });
    await page.locator(`#card-${deletion.id} details.reject-box summary`).click();
    await page.locator(`#reason-${deletion.id}`).fill('Keep it until the audit closes.');
    await page.screenshot({ path: `${RESULTS}console-pending.png`, fullPage: true });

    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    await phone.addCookies(await operator.cookies());
    const small = await phone.newPage();
    await small.goto(`${twokey.baseUrl}/console`);
    const width = await small.evaluate<number>('document.documentElement.scrollWidth');
    expect(width).toBeLessThanOrEqual(390);
    await small.screenshot({ path: `${RESULTS}console-pending-phone.png`, fullPage: true });
    await phone.close();

    // A card someone is typing in is kept while the list refreshes around it.
    await twokey.propose(apiKey, 'upgrade_plan', { org: 'globex', plan: 'pro' });
    await page.getByText('argus is requesting to upgrade globex to the pro plan.').waitFor({ timeout: 10_000 });
    expect(await page.locator(`#reason-${deletion.id}`).inputValue()).toBe('Keep it until the audit closes.');
  });

  it('is usable from the keyboard, with a visible focus ring', async () => {
    await page.goto(`${twokey.baseUrl}/console`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Skip to content');
    let reached = false;
    for (let i = 0; i < 40 && !reached; i += 1) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate<boolean>("document.activeElement?.textContent === 'Approve'");
    }
    expect(reached).toBe(true);
    const outline = await page.evaluate(
      '(() => { const style = getComputedStyle(document.activeElement); return { style: style.outlineStyle, width: style.outlineWidth }; })()',
    );
    expect(outline).toEqual({ style: 'solid', width: '3px' });
  });

  it('refuses a form posted without its CSRF token, and changes nothing', async () => {
    const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'initech', plan: 'enterprise' });
    await page.goto(`${twokey.baseUrl}/console`);
    const card = page.locator(`#card-${proposal.id}`);
    await card.locator('form[action$="/approve"] input[name="_csrf"]').evaluate((input) => input.remove());
    const [response] = await Promise.all([
      page.waitForResponse(`**/console/proposals/${proposal.id}/approve`),
      card.getByRole('button', { name: 'Approve' }).click(),
    ]);
    expect(response.status()).toBe(403);
    await page.getByText('This form could not be verified').waitFor();
    expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
    expect(await twokey.services.store.listApprovals(proposal.id)).toEqual([]);
  });

  it('approves on the proposal page, which then shows committed, the result and the timeline (screenshot)', async () => {
    const proposal = await twokey.propose(apiKey, 'send_mailing', { list: 'beta-testers', subject: 'Release 2.0 is out', recipients: 420 });
    await page.goto(`${twokey.baseUrl}/console`);
    await page.locator(`#card-${proposal.id} .summary a`).click();
    await page.waitForURL(`${twokey.baseUrl}/console/proposals/${proposal.id}`);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(`${twokey.baseUrl}/console/proposals/${proposal.id}?done=approve&id=${proposal.id}`);

    expect(await page.locator('.detail .badge').innerText()).toContain('Committed');
    const result = await page.locator('.result-ok pre').innerText();
    expect(JSON.parse(result)).toMatchObject({ echoed: true, operation: 'send_mailing', approvedBy: ['web:operator'] });
    const timeline = await page.locator('.timeline').innerText();
    for (const step of ['Proposed', 'Approval recorded', 'Approved (quorum reached)', 'Committed']) expect(timeline).toContain(step);
    expect(await page.locator('.chain').innerText()).toContain('Audit chain intact');
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    await page.screenshot({ path: `${RESULTS}console-timeline.png`, fullPage: true });
  });

  it('rejects with a reason; the agent reads the reason from the API', async () => {
    const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'umbrella', plan: 'enterprise' });
    await page.goto(`${twokey.baseUrl}/console`);
    const card = page.locator(`#card-${proposal.id}`);
    await card.getByText('Reject…').click();
    await card.getByLabel('Reason').fill('Budget frozen until Q3');
    await card.getByRole('button', { name: 'Reject proposal' }).click();
    await page.waitForURL(`${twokey.baseUrl}/console?done=reject&id=${proposal.id}`);
    expect(await page.locator('.notice').innerText()).toContain('You rejected');
    expect(await page.locator(`#card-${proposal.id}`).count()).toBe(0);

    const view = await twokey.request('GET', `/v1/proposals/${proposal.id}`, { apiKey });
    expect(view.body).toMatchObject({ status: 'rejected', decision: { by: 'web:operator', reason: 'Budget frozen until Q3' } });
  });

  it('a non-approver sees no buttons, and a forged post by them is refused', async () => {
    const proposal = await twokey.propose(apiKey, 'upgrade_plan', { org: 'hooli', plan: 'pro' });
    const mallory = await browser.newContext();
    const malloryPage = await mallory.newPage();
    await signInWith(malloryPage, 'mallory');
    const card = malloryPage.locator(`#card-${proposal.id}`);
    await card.waitFor();
    expect(await malloryPage.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect(await malloryPage.getByText('Reject…').count()).toBe(0);
    expect(await card.innerText()).toContain('not an approver of upgrade_plan');

    const csrf = csrfOf(await malloryPage.content());
    const forged = await mallory.request.post(`${twokey.baseUrl}/console/proposals/${proposal.id}/approve`, { form: { _csrf: csrf }, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'pending' });
    await mallory.close();
  });

  it('history and agents pages render their filters and tables (screenshots)', async () => {
    await page.goto(`${twokey.baseUrl}/console/history`);
    await page.getByLabel('Status').selectOption('committed');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=committed/);
    expect(await page.locator('tbody tr').count()).toBeGreaterThan(0);
    for (const badge of await page.locator('tbody .badge').allInnerTexts()) expect(badge).toContain('Committed');
    await page.goto(`${twokey.baseUrl}/console/history`);
    await page.screenshot({ path: `${RESULTS}console-history.png`, fullPage: true });
    await twokey.createAgent('hermes', { operations: ['send_mailing'] });
    await page.goto(`${twokey.baseUrl}/console/agents`);
    expect(await page.locator('tbody tr').count()).toBe(2);
    await page.screenshot({ path: `${RESULTS}console-agents.png`, fullPage: true });
  });

  it('signs out with a plain form; the session cookie no longer opens the console', async () => {
    await page.goto(`${twokey.baseUrl}/console`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You are signed out').waitFor();
    const response = await page.goto(`${twokey.baseUrl}/console/history`);
    expect(response?.url()).toBe(`${twokey.baseUrl}/console/login`);
  });
});
