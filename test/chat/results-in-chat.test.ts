import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDiscordIntegration } from '../../src/discord/index.js';
import { createSlackIntegration } from '../../src/slack/index.js';
import { drivers } from '../support/database.js';
import { findSecrets } from '../support/secret-scan.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { APPLICATION_ID, BOT_TOKEN as DISCORD_BOT_TOKEN, CHANNEL, makeSigner } from '../discord/helpers.js';
import { startFakeDiscord, type FakeDiscord } from '../discord/fake-discord.js';
import { startFakeSlack, type FakeSlack } from '../slack/support/fake-slack.js';
import { BOT_TOKEN as SLACK_BOT_TOKEN, SIGNING_SECRET } from '../slack/support/slack-requests.js';

/**
 * What a downstream service's answer may carry back: keys it was called with, in fields named like
 * secrets and in fields that are not. Chat (everyone in the channel) must see none of it.
 */
const LEAKS = {
  stripe: 'sk_live_51Hc9xQ2eZvKYlo2C8aBcDeFgHiJk',
  awsKeyId: 'AKIAIOSFODNN7EXAMPLE',
  awsSecret: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  password: 'correct-horse-battery-staple',
  github: `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`,
  openai: `sk-proj-${'Zx9Yw8Vu7T'.repeat(4)}`,
};
const ANSWER = {
  status: 'refunded',
  refundId: 're_1001',
  password: LEAKS.password,
  gateway: LEAKS.stripe,
  note: `rotated ${LEAKS.awsSecret} (id ${LEAKS.awsKeyId})`,
  ci: { github: LEAKS.github },
  model: LEAKS.openai,
};
const EXECUTOR_SECRET = 'refund-executor-secret-0123';

const operation = (name: string, extra: string, url: string) => `
  - name: ${name}
    description: Refund an order
    params:
      type: object
      required: [to, amount_cents]
      properties:
        to: { type: string }
        amount_cents: { type: integer }
    summary: "{{ agent }} refunds {{ params.amount_cents | usd }} to {{ params.to }}"
    ${extra}
    approval:
      approvers: [web:alice]
      slack: { channel: C0REFUNDS }
      discord: { channel: "${CHANNEL}" }
    commit: on_approve
    executor: { type: http, url: "${url}/refund", secret: "${EXECUTOR_SECRET}", timeout: 5s }`;

const config = (url: string) => `
operations:${operation('refund', '', url)}${operation('refund_json', 'chatResult: json', url)}${operation(
  'refund_template',
  'result: "{{ result.status }} as {{ result.refundId }}"',
  url,
)}
`;

/** A downstream that answers every refund with keys it should never have echoed. */
async function startLeakyDownstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ANSWER)));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return { url: `http://127.0.0.1:${address.port}`, server };
}

describe.each(drivers)('results reach chat as a status, not a dump (%s)', (driver) => {
  let slack: FakeSlack;
  let discord: FakeDiscord;
  let downstream: Awaited<ReturnType<typeof startLeakyDownstream>>;
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    slack = await startFakeSlack();
    discord = await startFakeDiscord({ applicationId: APPLICATION_ID });
    downstream = await startLeakyDownstream();
    twokey = await startTestTwokey({
      driver,
      configYaml: config(downstream.url),
      // Scanned for in the logs and in everything Slack and Discord received, when the suite closes.
      configVars: { ...LEAKS },
      chatPayloads: () => [...slack.calls.map((call) => call.args), ...discord.calls.map((call) => call.body)],
      env: {
        SLACK_BOT_TOKEN,
        SLACK_SIGNING_SECRET: SIGNING_SECRET,
        SLACK_API_URL: slack.url,
        DISCORD_BOT_TOKEN,
        DISCORD_APPLICATION_ID: APPLICATION_ID,
        DISCORD_PUBLIC_KEY: makeSigner().publicKeyHex,
        DISCORD_API_URL: discord.apiUrl,
      },
      integrations: (services, env, wiring) => [
        createSlackIntegration({ env, services, clickConcurrency: wiring.concurrency.slackClicks }),
        createDiscordIntegration({ env, services }),
      ],
    });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey?.close();
    await slack?.close();
    await discord?.close();
    await new Promise((done) => downstream?.server.close(done));
  });

  /** The newest Slack message and Discord message about a proposal, as sent. */
  const messagesAbout = (id: string) => {
    const slackCalls = slack.calls.filter((call) => ['chat.postMessage', 'chat.update'].includes(call.method) && !call.args.thread_ts);
    const discordCalls = discord.calls.filter((call) => ['POST', 'PATCH'].includes(call.method) && /^\/channels\/\d+\/messages/.test(call.path));
    return {
      slack: JSON.stringify(slackCalls.filter((call) => JSON.stringify(call.args).includes(id)).at(-1)?.args ?? null),
      discord: JSON.stringify(discordCalls.filter((call) => JSON.stringify(call.body).includes(id)).at(-1)?.body ?? null),
    };
  };

  /** Proposes, approves as web:alice (the click runs the executor), and waits for both chats to say committed. */
  async function refundCommitted(operationName: string, to = 'acme') {
    const proposed = await twokey.app.inject({
      method: 'POST',
      url: '/v1/proposals',
      headers: { authorization: `Bearer ${apiKey}` },
      payload: { operation: operationName, params: { to, amount_cents: 1250 } },
    });
    expect(proposed.statusCode, proposed.body).toBe(201);
    const id: string = proposed.json().id;
    await twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'web' });
    const shown = await vi.waitFor(
      () => {
        const messages = messagesAbout(id);
        expect(messages.slack).toContain('Committed');
        expect(messages.discord).toContain('Committed');
        return messages;
      },
      { timeout: 20_000, interval: 20 },
    );
    return { id, ...shown };
  }

  const expectNoLeak = (text: string) => {
    for (const leaked of Object.values(LEAKS)) expect(text).not.toContain(leaked);
    expect(findSecrets(text)).toEqual([]);
  };

  it('by default, Slack and Discord say "Committed" and show none of the result; the agent gets all of it', async () => {
    const { id, slack: slackText, discord: discordText } = await refundCommitted('refund');
    for (const text of [slackText, discordText]) {
      expectNoLeak(text);
      expect(text).not.toContain('refunded');
    }
    expect(slackText).toContain(':white_check_mark: *Committed*"');
    expect(discordText).toContain('✅ **Committed**"');
    // Not through the harness's request(), whose scan would flag the keys the agent is meant to get back.
    const agentView = await twokey.app.inject({ method: 'GET', url: `/v1/proposals/${id}`, headers: { authorization: `Bearer ${apiKey}` } });
    expect(agentView.json()).toMatchObject({ status: 'committed', result: ANSWER });
  });

  it("shows the operation's result template when it has one", async () => {
    const { slack: slackText, discord: discordText } = await refundCommitted('refund_template');
    for (const text of [slackText, discordText]) {
      expectNoLeak(text);
      expect(text).toContain('refunded as re_1001');
    }
  });

  it('with chatResult: json, shows the JSON with secret-named values and provider keys redacted', async () => {
    const { id, slack: slackText, discord: discordText } = await refundCommitted('refund_json');
    for (const text of [slackText, discordText]) {
      expectNoLeak(text);
      expect(text).toContain('\\"status\\":\\"refunded\\"');
      expect(text).toContain('\\"password\\":\\"[REDACTED]\\"');
      expect(text).toContain('\\"gateway\\":\\"[REDACTED]\\"');
    }
    expect((await twokey.services.proposals.get(id)).result).toEqual(ANSWER);
  });

  it('a look-alike param is flagged in the summary both chats show', async () => {
    const { slack: slackText, discord: discordText } = await refundCommitted('refund', '\u0410\u0421\u041C\u0415');
    expect(slackText).toContain('to АСМЕ [⚠ look-alike of “ACME”]');
    // Discord's markdown escapes (`\[`, `\-`) aside.
    const description = String(JSON.parse(discordText).embeds[0].description).replace(/\\/g, '');
    expect(description).toContain('to АСМЕ [⚠ look-alike of “ACME”]');
  });
});
