import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { chatResultText } from '../../src/chat/result-text.js';
import { createDiscordIntegration } from '../../src/discord/index.js';
import { createSlackIntegration } from '../../src/slack/index.js';
import { drivers } from '../support/database.js';
import { findSecrets } from '../support/secret-scan.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { APPLICATION_ID, BOT_TOKEN as DISCORD_BOT_TOKEN, CHANNEL, makeSigner } from '../discord/helpers.js';
import { startFakeDiscord, type FakeDiscord } from '../discord/fake-discord.js';
import { startFakeSlack, type FakeSlack } from '../slack/support/fake-slack.js';
import { BOT_TOKEN as SLACK_BOT_TOKEN, SIGNING_SECRET } from '../slack/support/slack-requests.js';

const operation = (name: string, result: string) => `
  - name: ${name}
    description: Orders placed over AGP
    confirmationType: payment
    params:
      type: object
      required: [businessId, request]
      properties:
        businessId: { type: string }
        request: { type: object, additionalProperties: true }
    summary: "{{ agent }} orders at {{ params.businessId }}"
    ${result}
    approval:
      approvers: [web:alice]
      slack: { channel: C0ORDERS }
      discord: { channel: "${CHANNEL}" }
    commit: agent
    executor: { type: agp }`;

const CONFIG = `
operations:${operation('agp_order', '')}${operation('agp_order_short', 'result: "{{ result.status }}, for {{ agent }}"')}${operation('agp_order_json', 'chatResult: json')}
businesses:
  echo-approved:
    adapter: echo
    approval: { operation: agp_order }
  echo-short:
    adapter: echo
    approval: { operation: agp_order_short }
  echo-json:
    adapter: echo
    approval: { operation: agp_order_json }
`;

const order = { items: [{ productId: 'echo-widget-1', quantity: 1 }] };

describe('what chat shows of a result', () => {
  const context = { agent: 'argus', operation: 'agp_order', params: {} };

  it('shows nothing of a result by default: the outcome says it committed, the console has the rest', () => {
    expect(chatResultText({ status: 'completed', orderId: 'o1' }, context)).toBeNull();
    expect(chatResultText({ status: 'completed' }, context, { json: false })).toBeNull();
  });

  it('opted-in JSON: secret-named values redacted, then scrubbed before shortening, so half a token cannot slip through', () => {
    const token = `tk_conf_${'A'.repeat(43)}`;
    const text = chatResultText({ status: 'pending_confirmation', confirmationToken: token, note: 'x'.repeat(500) }, context, { json: true });
    expect(text).toContain('"confirmationToken":"[REDACTED]"');
    expect(text).toHaveLength(200);
    expect(findSecrets(text ?? '')).toEqual([]);
    expect(chatResultText({ padding: 'y'.repeat(170), note: token }, context, { json: true })).not.toMatch(/tk_conf_/);
  });

  it('uses the operation result template when there is one, and no result means none', () => {
    const template = (ctx: { result: unknown }) => `done: ${String((ctx.result as { orderId: string }).orderId)}`;
    expect(chatResultText({ status: 'completed', orderId: 'o1' }, context, { template })).toBe('done: o1');
    expect(chatResultText(null, context, { template, json: true })).toBeNull();
  });
});

describe.each(drivers)('an AGP order approved in chat commits (%s)', (driver) => {
  let slack: FakeSlack;
  let discord: FakeDiscord;
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    slack = await startFakeSlack();
    discord = await startFakeDiscord({ applicationId: APPLICATION_ID });
    twokey = await startTestTwokey({
      driver,
      configYaml: CONFIG,
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
  });

  /** Prepares, approves as web:alice and executes; returns the agent's answer (it may hold the business's token). */
  async function orderAndApprove(businessId: string) {
    const prepared = await twokey.request('POST', '/agp/execute/prepare', { apiKey, body: { businessId, request: order } });
    expect(prepared.status, JSON.stringify(prepared.body)).toBe(200);
    await twokey.services.proposals.approve(prepared.body.proposalId, { identity: 'web:alice', via: 'web' });
    // Not through the harness's scan: the agent's own answer is where the business's token belongs.
    const executed = await twokey.app.inject({
      method: 'POST',
      url: '/agp/execute',
      headers: { authorization: `Bearer ${apiKey}`, 'x-confirmation-token': prepared.body.confirmationToken },
      payload: { businessId, request: order },
    });
    expect(executed.statusCode, executed.body).toBe(200);
    const answer = executed.json();
    expect(answer.data).toMatchObject({ status: 'pending_confirmation', confirmationToken: expect.stringMatching(/^tk_conf_/) });
    const id: string = prepared.body.proposalId;
    const committed = await vi.waitFor(
      () => {
        // The first post may already show the committed state, when the outbox runs after the commit.
        const slackCalls = slack.calls.filter((call) => ['chat.postMessage', 'chat.update'].includes(call.method) && !call.args.thread_ts);
        const discordCalls = discord.calls.filter((call) => ['POST', 'PATCH'].includes(call.method) && /^\/channels\/\d+\/messages/.test(call.path));
        const slackText = JSON.stringify(slackCalls.filter((call) => JSON.stringify(call.args).includes(id)).at(-1)?.args ?? null);
        const discordText = JSON.stringify(discordCalls.filter((call) => JSON.stringify(call.body).includes(id)).at(-1)?.body ?? null);
        expect(slackText).toContain('Committed');
        expect(discordText).toContain('Committed');
        return { slackText, discordText };
      },
      { timeout: 20_000, interval: 20 },
    );
    return { answer, ...committed, id };
  }

  it('shows only the outcome in Slack and Discord by default; the agent and the console keep the result whole', async () => {
    const { answer, slackText, discordText, id } = await orderAndApprove('echo-approved');
    for (const text of [slackText, discordText]) {
      expect(text).not.toContain('tk_conf_');
      expect(text).not.toContain('pending_confirmation');
    }
    expect((await twokey.services.proposals.get(id)).result).toMatchObject({ confirmationToken: answer.data.confirmationToken });
  });

  it('shows the result as redacted JSON when the operation opts in (chatResult: json)', async () => {
    const { slackText, discordText } = await orderAndApprove('echo-json');
    for (const text of [slackText, discordText]) {
      expect(text).not.toContain('tk_conf_');
      expect(text).toContain('{\\"status\\":\\"pending_confirmation\\"');
    }
  });

  it("shows the operation's result template instead, when it has one", async () => {
    const { slackText, discordText } = await orderAndApprove('echo-short');
    expect(slackText).toContain('*Committed*: pending_confirmation, for argus');
    expect(discordText).toContain('pending_confirmation, for argus');
    expect(discordText).not.toContain('confirmationToken');
  });
});
