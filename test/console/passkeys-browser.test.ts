import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signInUrl } from '../../src/console/index.js';
import { findChromium, pageWithPasskeys } from '../support/chromium.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';
import { freePort } from '../support/processes.js';
import { buttonClick, interactionBody } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

const RESULTS = fileURLToPath(new URL('../../test-results/', import.meta.url));
const WAIT = { timeout: 10_000, interval: 50 };

/** Alice approves in Slack and in the console; `delete_workspace` asks for her passkey. */
const CONFIG = configYaml(
  [`${deleteWorkspaceOperation({ approvers: ['slack:U0ALICE', 'web:alice'], slack: 'C0DANGER', commit: 'on_approve' })}    stepUp: passkey\n`],
  `people:\n  - name: alice\n    identities: [slack:U0ALICE, web:alice]\n`,
);

describe('passkey step-up in a real browser (virtual authenticator)', () => {
  let browser: Browser;
  let twokey: SlackTwokey;
  let page: Page;
  let base: string;
  const runs: string[] = [];

  beforeAll(async () => {
    await mkdir(RESULTS, { recursive: true });
    const port = await freePort();
    // http://localhost is a secure context, where a page may use WebAuthn; 127.0.0.1 is no valid RP ID.
    base = `http://localhost:${port}`;
    const found = await findChromium();
    [browser, twokey] = await Promise.all([
      chromium.launch({ executablePath: found.executablePath, args: found.args, headless: true }),
      startSlackTwokey({
        driver: 'pglite',
        configYaml: CONFIG,
        env: { TWOKEY_PUBLIC_URL: base },
        agent: { name: 'cleaner', owners: ['slack:U0OWNER'] },
        executorFor: () => ({
          kind: 'local',
          async run(request) {
            runs.push(request.proposalId);
            return { deleted: request.params.workspace };
          },
        }),
      }),
    ]);
    await twokey.app.listen({ host: '127.0.0.1', port });
    ({ page } = await pageWithPasskeys(browser));
  }, 300_000);
  afterAll(async () => {
    await browser?.close();
    await twokey?.close();
  });

  const propose = async (workspace: string): Promise<string> => {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey: twokey.apiKey, body: { operation: 'delete_workspace', params: { workspace } } });
    expect(response.status).toBe(201);
    return (response.body as { id: string }).id;
  };
  const statusOf = async (id: string) => (await twokey.services.store.getProposal(id))?.status;

  it('signs in with a one-time link and registers a passkey', async () => {
    await page.goto(signInUrl(base, (await twokey.webConsole.auth.mintLink('alice')).token));
    await page.getByRole('button', { name: 'Sign in as web:alice' }).click();
    await page.waitForURL(`${base}/console?done=signed-in`);
    await page.goto(`${base}/console/passkeys`);
    await page.locator('#passkey-label').fill('laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.waitForURL(`${base}/console/passkeys?done=passkey-registered`);
    expect(await page.locator('#passkeys').innerText()).toContain('laptop');
    expect(await twokey.services.passkeys.list('web:alice')).toHaveLength(1);
    await page.screenshot({ path: `${RESULTS}console-passkeys.png`, fullPage: true });
  });

  it('a Slack click does not decide; the link it answers with leads to the approval with the passkey, which executes once', async () => {
    const id = await propose('acme');
    const answer = await twokey.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE', channel: 'C0DANGER' })));
    expect(answer.status).toBe(200);
    const told = await vi.waitFor(() => {
      const call = twokey.fake.callsTo('chat.postEphemeral').find((c) => c.args.user === 'U0ALICE' && String(c.args.text).includes(id));
      if (!call) throw new Error('not told yet');
      return String(call.args.text);
    }, WAIT);
    const link = `${base}/console/proposals/${id}`;
    expect(told).toContain(link);
    expect(await statusOf(id)).toBe('pending');
    expect(await twokey.services.store.listApprovals(id)).toEqual([]);

    await page.goto(link);
    await page.getByRole('button', { name: 'Approve with passkey' }).click();
    await page.waitForURL(`${link}?done=approve&id=${id}`);
    expect(await page.locator('.detail .badge').innerText()).toContain('Committed');
    expect(runs.filter((run) => run === id)).toHaveLength(1);
    const [approval] = await twokey.services.store.listApprovals(id);
    expect(approval).toMatchObject({ approver: 'web:alice', stepUp: { kind: 'passkey' } });
  });

  it('refuses an assertion carried onto another proposal, and a replay of it; nothing changes', async () => {
    const meant = await propose('meant');
    const other = await propose('other');
    // The browser's real assertion for `meant`, sent to `other`'s approve instead.
    let captured = '';
    await page.route(`**/console/proposals/${meant}/approve`, async (route) => {
      captured = route.request().postData() ?? '';
      await route.continue({ url: `${base}/console/proposals/${other}/approve` });
    });
    await page.goto(`${base}/console/proposals/${meant}`);
    const [refused] = await Promise.all([
      page.waitForResponse(`**/console/proposals/${other}/approve`),
      page.getByRole('button', { name: 'Approve with passkey' }).click(),
    ]);
    await page.unroute(`**/console/proposals/${meant}/approve`);
    expect(refused.status()).toBe(403);
    await page.getByText('made for another proposal').waitFor();
    expect(captured).toContain('credential=');
    expect(await statusOf(other)).toBe('pending');
    expect(await twokey.services.store.listApprovals(other)).toEqual([]);

    // The same assertion where it belongs approves `meant`; once more, it is spent.
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    expect((await page.request.post(`${base}/console/proposals/${meant}/approve`, { data: captured, headers, maxRedirects: 0 })).status()).toBe(303);
    expect(await statusOf(meant)).toBe('committed');
    const replayed = await page.request.post(`${base}/console/proposals/${other}/approve`, { data: captured, headers, maxRedirects: 0 });
    expect(replayed.status()).toBe(403);
    expect(await statusOf(other)).toBe('pending');
    expect(runs.filter((run) => run === other)).toHaveLength(0);
  });

  it('refuses an approval posted without an assertion, with the reason', async () => {
    const id = await propose('bare');
    await page.goto(`${base}/console/proposals/${id}`);
    // As if passkeys.js did not run: the plain form posts.
    await page.locator('form[data-passkey="approve"]').evaluate((form) => form.removeAttribute('data-passkey'));
    const [response] = await Promise.all([
      page.waitForResponse(`**/console/proposals/${id}/approve`),
      page.getByRole('button', { name: 'Approve with passkey' }).click(),
    ]);
    expect(response.status()).toBe(403);
    await page.getByRole('heading', { name: 'This approval needs your passkey' }).waitFor();
    expect(await page.locator('main').innerText()).toContain('The form carried no passkey assertion');
    expect(await statusOf(id)).toBe('pending');
    expect(await twokey.services.store.listApprovals(id)).toEqual([]);
  });
});
