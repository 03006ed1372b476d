import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { findChromium, pageWithPasskeys } from '../support/chromium.js';
import { startTestIssuer, type TestIssuer } from '../support/oidc-issuer.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';
import { freePort } from '../support/processes.js';
import { buttonClick, interactionBody } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

/**
 * The whole path a company would use, in a real browser: Alice signs in through the company's
 * OpenID Connect issuer (a local `oidc-provider` with keys of its own), registers a passkey (Chromium's
 * virtual authenticator), and approves a `stepUp: passkey` proposal that her Slack click alone could
 * not decide. Her Slack and issuer identities are one person.
 */

const RESULTS = fileURLToPath(new URL('../../test-results/', import.meta.url));
const WAIT = { timeout: 10_000, interval: 50 };

describe('sign-in through the issuer, a passkey, and a step-up approval (real browser)', () => {
  let browser: Browser;
  let issuer: TestIssuer;
  let twokey: SlackTwokey;
  let page: Page;
  let base: string;
  const runs: string[] = [];

  beforeAll(async () => {
    await mkdir(RESULTS, { recursive: true });
    const port = await freePort();
    // http://localhost is a secure context, where a page may use WebAuthn.
    base = `http://localhost:${port}`;
    issuer = await startTestIssuer({ redirectUri: `${base}/console/auth/callback` });
    const yaml = configYaml(
      [`${deleteWorkspaceOperation({ approvers: ['slack:U0ALICE', 'oidc:alice'], slack: 'C0DANGER', commit: 'on_approve' })}    stepUp: passkey\n`],
      `
console:
  oidc:
    issuer: ${issuer.issuer}
    name: Acme SSO
    clientId: ${issuer.clientId}
people:
  - name: alice
    identities: [slack:U0ALICE, oidc:alice]
`,
    );
    const found = await findChromium();
    [browser, twokey] = await Promise.all([
      chromium.launch({ executablePath: found.executablePath, args: found.args, headless: true }),
      startSlackTwokey({
        driver: 'pglite',
        configYaml: yaml,
        configVars: { TWOKEY_OIDC_CLIENT_SECRET: issuer.clientSecret },
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
    await issuer?.close();
  });

  it('signs in through the issuer, registers a passkey, and approves with it what a Slack click could not', async () => {
    // Sign in: twokey's page → the issuer's login and consent pages → back to twokey.
    await page.goto(`${base}/console/login`);
    await page.getByRole('link', { name: 'Sign in with Acme SSO' }).click();
    await page.waitForURL((url) => url.origin === issuer.issuer);
    await page.locator('input[name="login"]').fill('alice');
    await page.locator('input[name="password"]').fill('any');
    await page.locator('button[type="submit"]').click();
    await page.locator('button[type="submit"]').click(); // the issuer's consent page
    await page.getByRole('link', { name: 'Continue to the console' }).click();
    await page.waitForURL(`${base}/console?done=signed-in`);
    expect(await page.locator('body').innerText()).toContain('oidc:alice');

    await page.goto(`${base}/console/passkeys`);
    await page.locator('#passkey-label').fill('laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.waitForURL(`${base}/console/passkeys?done=passkey-registered`);
    expect(await page.locator('#passkeys').innerText()).toContain('laptop');

    // Alice's Slack click does not decide: she is told, privately, where to approve.
    const proposed = await twokey.request('POST', '/v1/proposals', {
      apiKey: twokey.apiKey,
      body: { operation: 'delete_workspace', params: { workspace: 'acme' } },
    });
    expect(proposed.status).toBe(201);
    const id = (proposed.body as { id: string }).id;
    const answer = await twokey.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE', channel: 'C0DANGER' })));
    expect(answer.status).toBe(200);
    const link = `${base}/console/proposals/${id}`;
    await vi.waitFor(() => {
      const told = twokey.fake.callsTo('chat.postEphemeral').find((call) => call.args.user === 'U0ALICE' && String(call.args.text).includes(link));
      expect(told).toBeDefined();
    }, WAIT);
    expect((await twokey.services.store.getProposal(id))?.status).toBe('pending');
    expect(await twokey.services.store.listApprovals(id)).toEqual([]);

    // In the console, signed in through the issuer, her passkey decides it; it runs once.
    await page.goto(link);
    await page.getByRole('button', { name: 'Approve with passkey' }).click();
    await page.waitForURL(`${link}?done=approve&id=${id}`);
    expect(await page.locator('.detail .badge').innerText()).toContain('Committed');
    await page.screenshot({ path: `${RESULTS}console-step-up-approved.png`, fullPage: true });
    expect(runs).toEqual([id]);
    const [approval] = await twokey.services.store.listApprovals(id);
    expect(approval).toMatchObject({ approver: 'oidc:alice', stepUp: { kind: 'passkey' } });
  }, 120_000);
});
