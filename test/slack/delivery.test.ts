import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChatIntegration, ProposalMessageView } from '../../src/chat/types.js';
import { DeliveryError } from '../../src/lib/delivery-error.js';
import { createSlackIntegration } from '../../src/slack/index.js';
import { drivers } from '../support/database.js';
import { freePort } from '../support/processes.js';
import type { FakeSlack, SlackCall } from './support/fake-slack.js';
import { BOT_TOKEN, SIGNING_SECRET } from './support/slack-requests.js';
import { rotateKeyOperation } from './support/rotate-key.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

const CONFIG = `
operations:
${rotateKeyOperation('{ type: echo }', '    commit: on_approve\n')}  - name: drop_table
    description: Drop a table
    params:
      type: object
      required: [table]
      properties:
        table: { type: string }
    summary: "{{agent}} wants to drop {{params.table}}."
    approval:
      approvers: [slack:U0ALICE]
      slack: { channel: C0GONE }
    commit: on_approve
    executor: { type: echo }
`;

const WAIT = { timeout: 8_000, interval: 25 };

function view(overrides: Partial<ProposalMessageView> = {}): ProposalMessageView {
  return {
    id: 'prp_view',
    operation: 'rotate_key',
    description: 'Rotate a production API key',
    summary: 'keybot wants to rotate the billing key.',
    agent: 'keybot',
    confirmationType: 'approval',
    cost: null,
    expiresAt: new Date('2026-11-22T10:05:00Z'),
    status: 'pending',
    quorum: 1,
    approvals: [],
    decision: null,
    result: null,
    error: null,
    consoleUrl: null,
    trail: [],
    ...overrides,
  };
}

describe.each(drivers)('Slack delivery through the outbox (%s)', (driver) => {
  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let slack: ChatIntegration;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, configYaml: CONFIG, agent: { name: 'keybot' } });
    ({ fake, slack, apiKey } = twokey);
  });
  afterAll(() => twokey?.close());

  async function propose(operation: string, params: Record<string, unknown>): Promise<string> {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation, params } });
    expect(response.status).toBe(201);
    return response.body.id;
  }
  const postsOf = (id: string): SlackCall[] =>
    fake.callsTo('chat.postMessage').filter((c) => !c.args.thread_ts && JSON.stringify(c.args.blocks ?? []).includes(id));

  it('a post answered 429 with Retry-After arrives once, after the wait Slack asked for', async () => {
    let limited = 0;
    const stop = fake.respond((call) =>
      call.method === 'chat.postMessage' && limited++ === 0
        ? { status: 429, headers: { 'retry-after': '1' }, body: { ok: false, error: 'ratelimited' } }
        : undefined,
    );
    const id = await propose('rotate_key', { key: 'billing' });
    await vi.waitFor(() => expect(postsOf(id)).toHaveLength(2), WAIT);
    stop();
    const [refused, delivered] = postsOf(id) as [SlackCall, SlackCall];
    expect(delivered.at - refused.at).toBeGreaterThanOrEqual(950);
    await new Promise((done) => setTimeout(done, 300));
    expect(postsOf(id)).toHaveLength(2);
    expect(twokey.logs.join('')).toMatch(/"retryInMs":1000[^\n]*will retry/);
  });

  it('a post made while Slack is down arrives once Slack is back', async () => {
    let failures = 0;
    const stop = fake.respond((call) => (call.method === 'chat.postMessage' && failures++ < 3 ? { status: 503, body: 'upstream unavailable' } : undefined));
    const id = await propose('rotate_key', { key: 'search' });
    await vi.waitFor(() => expect(postsOf(id)).toHaveLength(4), WAIT);
    stop();

    // The message was recorded once it arrived, so the approval edits that one message.
    await twokey.services.proposals.approve(id, { identity: 'slack:U0ALICE', via: 'test' });
    await vi.waitFor(
      () =>
        expect(fake.callsTo('chat.update').some((c) => JSON.stringify(c.args.blocks).includes(id) && JSON.stringify(c.args.blocks).includes('Committed'))).toBe(
          true,
        ),
      WAIT,
    );
    expect(postsOf(id)).toHaveLength(4);
  });

  it('a channel Slack does not know is not retried', async () => {
    const stop = fake.respond((call) =>
      call.method === 'chat.postMessage' && call.args.channel === 'C0GONE' ? { body: { ok: false, error: 'channel_not_found' } } : undefined,
    );
    const before = fake.callsTo('chat.postMessage').filter((c) => c.args.channel === 'C0GONE').length;
    await propose('drop_table', { table: 'users' });
    await vi.waitFor(() => expect(twokey.logs.join('')).toContain('outbox job is dead'), WAIT);
    await new Promise((done) => setTimeout(done, 300));
    expect(fake.callsTo('chat.postMessage').filter((c) => c.args.channel === 'C0GONE').length - before).toBe(1);
    stop();
  });

  describe('publisher errors', () => {
    it('maps 429 + Retry-After to retryAfterMs, after exactly one request', async () => {
      const stop = fake.respond((call) => (call.method === 'chat.postMessage' ? { status: 429, headers: { 'retry-after': '7' }, body: {} } : undefined));
      const before = fake.callsTo('chat.postMessage').length;
      const error = await slack.publisher.post('C0KEYS', view()).catch((e: unknown) => e);
      stop();
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).options).toEqual({ retryAfterMs: 7000 });
      expect(fake.callsTo('chat.postMessage').length - before).toBe(1);
    });

    it.each(['channel_not_found', 'not_in_channel', 'invalid_auth', 'account_inactive'])('treats %s as permanent', async (code) => {
      const stop = fake.respond((call) => (call.method === 'chat.update' ? { body: { ok: false, error: code } } : undefined));
      const error = await slack.publisher.update({ channel: 'C0KEYS', messageId: '1.2' }, view()).catch((e: unknown) => e);
      stop();
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).options.permanent).toBe(true);
      expect((error as DeliveryError).message).toContain(code);
    });

    it('posts and edits through undici, not the global fetch, and reads Slack answers the same', async () => {
      const before = fake.calls.length;
      const ref = await slack.publisher.post('C0KEYS', view());
      expect(ref.messageId).toMatch(/^\d+\.\d+$/);
      await slack.publisher.update(ref, view({ status: 'committed' }));
      const stop = fake.respond((call) => (call.method === 'chat.update' ? { status: 503, body: 'unavailable' } : undefined));
      const error = await slack.publisher.update(ref, view()).catch((e: unknown) => e);
      stop();
      expect((error as DeliveryError).message).toBe('Slack chat.update: HTTP 503');
      const sent = fake.calls.slice(before);
      expect(sent.map((call) => call.method)).toEqual(['chat.postMessage', 'chat.update', 'chat.update']);
      // Node's global fetch adds the Fetch standard's request headers; undici's request adds none.
      for (const call of sent) expect(call.headers['sec-fetch-mode']).toBeUndefined();
      expect(sent[0]?.authorization).toBe(`Bearer ${BOT_TOKEN}`);
    });

    it('treats an unreachable Slack as transient, and never names the token', async () => {
      const port = await freePort();
      const offline = createSlackIntegration({
        env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: `http://127.0.0.1:${port}/api/` },
        services: twokey.services,
      });
      const error = await offline.publisher.post('C0KEYS', view()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).options.permanent).toBeFalsy();
      expect(String((error as DeliveryError).message)).not.toContain(BOT_TOKEN);
    });
  });
});
