import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findChromium } from '../support/chromium.js';
import { ALICE, eventually, linksOf, startEmailTwokey, type EmailTwokey } from './helpers.js';

/** Set TWOKEY_SCREENSHOTS=1 to refresh the pictures docs/email.md shows. */
const IMAGES = process.env.TWOKEY_SCREENSHOTS === '1' ? fileURLToPath(new URL('../../docs/images/', import.meta.url)) : null;

describe('an approval mail clicked through in a real browser', () => {
  let browser: Browser;
  let t: EmailTwokey;
  let page: Page;

  beforeAll(async () => {
    if (IMAGES) await mkdir(IMAGES, { recursive: true });
    const found = await findChromium();
    [browser, t] = await Promise.all([
      chromium.launch({ executablePath: found.executablePath, args: found.args, headless: true }),
      startEmailTwokey({ driver: 'pglite' }),
    ]);
    page = await (await browser.newContext({ viewport: { width: 900, height: 900 } })).newPage();
    // The first run may unpack @sparticuz/chromium's browser into the temp directory.
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('opens the mail’s Approve link on a confirm page, approves with its button, and runs the operation once', async () => {
    const created = await t.twokey.request('POST', '/v1/proposals', {
      apiKey: t.apiKey,
      body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } },
    });
    const id = created.body.id as string;
    const mail = await eventually(() => {
      const found = t.mail.to('alice@example.com').find((entry) => entry.mail.text?.includes(id));
      if (!found) throw new Error('no mail yet');
      return found.mail;
    });
    const links = linksOf(mail);

    // The mail as a client shows it; its Approve is a plain link to the confirm page.
    await page.setContent(typeof mail.html === 'string' ? mail.html : '');
    if (IMAGES) await page.screenshot({ path: `${IMAGES}email-approval-mail.png`, fullPage: true });
    await Promise.all([page.waitForURL(links.approve), page.getByRole('link', { name: 'Approve', exact: true }).click()]);

    // Opening it decided nothing.
    expect(await page.locator('h1.summary').innerText()).toBe('argus is requesting to upgrade acme to the scale plan.');
    expect(await page.getByText(`You decide as ${ALICE}`).count()).toBe(1);
    expect((await t.twokey.services.store.getProposal(id))?.status).toBe('pending');
    if (IMAGES) await page.screenshot({ path: `${IMAGES}email-confirm-page.png`, fullPage: true });

    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.getByText('You approved this proposal.').waitFor();
    expect(await page.locator('.status-line').innerText()).toContain('Committed');
    expect((await t.twokey.services.store.getProposal(id))?.status).toBe('committed');
    const runs = t.downstream.requests.filter((request) => JSON.stringify(request.body).includes('acme'));
    expect(runs).toHaveLength(1);
    if (IMAGES) await page.screenshot({ path: `${IMAGES}email-approved.png`, fullPage: true });

    // Back to the form and press again: the spent link decides nothing more.
    await page.goBack();
    await page.goto(links.approve);
    expect(await page.locator('main').innerText()).toContain('already used');
    await page.goBack();
    expect(t.downstream.requests.filter((request) => JSON.stringify(request.body).includes('acme'))).toHaveLength(1);
  });
});
