import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createSlackIntegration } from '../../src/slack/index.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { startFakeSlack, type FakeSlack } from './support/fake-slack.js';
import { BOT_TOKEN, RESPONSE_URL, buttonClick } from './support/slack-requests.js';

const APP_TOKEN = 'xapp-1-A0TWOKEY-1234-sockettesttoken';
const WAIT = { timeout: 5_000, interval: 20 };

const CONFIG = `
operations:
  - name: restart_service
    description: Restart a production service
    params:
      type: object
      required: [service]
      properties:
        service: { type: string }
    summary: "{{agent}} wants to restart {{params.service}}."
    approval:
      approvers: [slack:U0ALICE]
      slack: { channel: C0OPS }
    commit: on_approve
    executor: { type: echo }
`;

// Socket Mode holds no database-specific logic: PGlite is enough here.
describe('Slack over Socket Mode', () => {
  let fake: FakeSlack;
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    fake = await startFakeSlack();
    twokey = await startTestTwokey({
      driver: 'pglite',
      chatPayloads: () => [...fake.calls.map((call) => call.args), ...fake.socketMessages],
      configYaml: CONFIG,
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: APP_TOKEN, SLACK_API_URL: fake.url },
      // The Socket Mode client waits clientPingTimeout before reconnecting (5 s by default); it is
      // also how long a pong may take, so not so short that a busy test machine misses one.
      integrations: (services, env, wiring) => [
        createSlackIntegration({ env, services, clickConcurrency: wiring.concurrency.slackClicks, socketMode: { clientPingTimeoutMs: 1_000 } }),
      ],
    });
    ({ apiKey } = await twokey.createAgent('ops-bot'));
  });
  afterAll(async () => {
    await twokey?.close();
    await fake?.close();
  });

  async function proposeAndWaitForMessage(service: string): Promise<string> {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'restart_service', params: { service } } });
    expect(response.status).toBe(201);
    const id: string = response.body.id;
    await vi.waitFor(() => expect(fake.callsTo('chat.postMessage').some((c) => JSON.stringify(c.args.blocks ?? []).includes(id))).toBe(true), WAIT);
    return id;
  }

  async function clickOverSocket(envelopeId: string, proposalId: string) {
    const socket = fake.sockets.filter((s) => s.readyState === s.OPEN).at(-1);
    if (!socket) throw new Error('no open socket');
    socket.send(
      JSON.stringify({
        envelope_id: envelopeId,
        type: 'interactive',
        accepts_response_payload: false,
        payload: buttonClick({ actionId: 'twokey_approve', proposalId, userId: 'U0ALICE', channel: 'C0OPS' }),
      }),
    );
    await vi.waitFor(() => expect(fake.socketMessages.some((m) => m.envelope_id === envelopeId)).toBe(true), WAIT);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(proposalId)).status).toBe('committed'), WAIT);
  }

  it('connects with the app token, has no HTTP endpoint, and acks an interactive envelope', async () => {
    expect(fake.callsTo('apps.connections.open')).toHaveLength(1);
    expect(fake.callsTo('apps.connections.open')[0]?.authorization).toBe(`Bearer ${APP_TOKEN}`);
    expect(fake.sockets).toHaveLength(1);
    expect((await twokey.app.inject({ method: 'POST', url: '/slack/events', payload: 'x' })).statusCode).toBe(404);

    const id = await proposeAndWaitForMessage('billing');
    await clickOverSocket('env-1', id);
    expect(await twokey.services.store.listApprovals(id)).toEqual([expect.objectContaining({ approver: 'slack:U0ALICE', via: 'slack' })]);
  });

  it('reconnects after a disconnect message and keeps handling clicks', async () => {
    const connections = fake.sockets.length;
    const opened = fake.callsTo('apps.connections.open').length;
    fake.sockets.at(-1)?.send(JSON.stringify({ type: 'disconnect', reason: 'refresh_requested' }));
    await vi.waitFor(() => expect(fake.sockets.length).toBeGreaterThan(connections), WAIT);
    expect(fake.callsTo('apps.connections.open').length).toBeGreaterThan(opened);
    expect(fake.sockets[connections - 1]?.readyState).not.toBe(fake.sockets[connections - 1]?.OPEN);

    const id = await proposeAndWaitForMessage('search');
    await clickOverSocket('env-2', id);
  });

  it('fails start at once when Slack refuses the app token', async () => {
    const refuse = fake.respond((call) => (call.method === 'apps.connections.open' ? { body: { ok: false, error: 'invalid_auth' } } : undefined));
    const revoked = createSlackIntegration({
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_APP_TOKEN: 'xapp-1-revoked', SLACK_API_URL: fake.url },
      services: twokey.services,
    });
    await expect(revoked.start?.()).rejects.toThrow(/invalid_auth/);
    await revoked.stop?.();
    refuse();
  });

  it('logs neither token nor response_url', () => {
    const logs = twokey.logs.join('');
    expect(logs).toContain('Slack Socket Mode connected');
    for (const secret of [APP_TOKEN, BOT_TOKEN, RESPONSE_URL, 'RESPONSEURLSECRET']) expect(logs).not.toContain(secret);
  });
});
