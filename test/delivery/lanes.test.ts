import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { jobs } from '../../src/db/schema.js';
import { drivers } from '../support/database.js';
import type { FakeSlack } from '../slack/support/fake-slack.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

const CONFIG = `
operations:
  - name: rotate_key
    description: Rotate a key
    params: { type: object, required: [key], properties: { key: { type: string } } }
    summary: "{{agent}} wants to rotate the {{params.key}} key."
    approval: { approvers: [slack:U0ALICE], slack: { channel: C0KEYS } }
    executor: { type: echo }
  - name: ping
    description: Ping
    params: { type: object, required: [n], properties: { n: { type: integer } } }
    summary: "{{agent}} pings {{params.n}}."
    approval: { approvers: [web:alice] }
    executor: { type: echo }
`;

/** A callback receiver that reads each request and never answers; `handle` switches it to answering. */
async function startReceiver(handle?: (req: IncomingMessage, res: ServerResponse) => void) {
  let open = 0;
  let received = 0;
  const server = createServer((req, res) => {
    received += 1;
    open += 1;
    // The response closes when the connection does (the request's own 'close' fires once its body is read).
    res.on('close', () => (open -= 1));
    req.resume();
    if (handle) req.on('end', () => handle(req, res));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    open: () => open,
    received: () => received,
    async close() {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
}

describe.each(drivers)('outbox lanes (%s)', (driver) => {
  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let apiKey: string;
  let hostile: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    hostile = await startReceiver();
    twokey = await startSlackTwokey({
      driver,
      configYaml: CONFIG,
      // The hostile receiver holds every request for as long as twokey lets it: here, far longer
      // than any test waits, so "arrived before a callback attempt ended" cannot be won by timing.
      callbackTimeoutMs: 600_000,
      outboxHandlerDeadlineMs: 600_000,
      outboxLeaseMs: 1_200_000,
      outboxPollMs: 50,
      agent: { name: 'lanes' },
    });
    ({ fake, apiKey } = twokey);
    // 40 callbacks to a receiver that never answers, queued before anything else.
    for (let n = 0; n < 40; n += 1) {
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'ping', params: { n }, callbackUrl: hostile.url } });
      await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
    }
    await vi.waitFor(() => expect(hostile.open()).toBeGreaterThan(0), { timeout: 60_000 });
  }, 180_000);
  afterAll(async () => {
    // Hung-up requests fail at once, so shutdown does not wait for the callback timeout.
    await hostile.close();
    await twokey.close();
  }, 180_000);

  /** Callback attempts that have ended (answered, failed or timed out) leave their error on the job. */
  async function endedCallbackAttempts(): Promise<number> {
    const rows = await twokey.services.database.db.select().from(jobs).where(eq(jobs.kind, 'callback.deliver'));
    return rows.filter((job) => job.lastError !== null || (job.status !== 'running' && job.attempts > 0)).length;
  }

  it('a chat post is not queued behind callbacks that never answer', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'rotate_key', params: { key: 'billing' } } });
    await vi.waitFor(
      () => expect(fake.callsTo('chat.postMessage').some((call) => JSON.stringify(call.args.blocks ?? []).includes(proposed.body.id))).toBe(true),
      { timeout: 60_000, interval: 20 },
    );
    // Every hostile callback that started is still hanging: the post did not wait for one to end.
    expect(await endedCallbackAttempts()).toBe(0);
  }, 120_000);

  it('one destination that never answers holds at most its share of the callback lane', async () => {
    expect(hostile.open()).toBeLessThanOrEqual(2);
    const good = await startReceiver((_req, res) => res.writeHead(204).end());
    try {
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'ping', params: { n: 99 }, callbackUrl: good.url } });
      await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
      await vi.waitFor(() => expect(good.received()).toBe(1), { timeout: 60_000, interval: 20 });
      const hostileJobs = (await twokey.services.database.db.select().from(jobs).where(eq(jobs.kind, 'callback.deliver'))).filter(
        (job) => job.payload.proposalId !== proposed.body.id,
      );
      expect(hostileJobs.every((job) => job.lastError === null)).toBe(true);
    } finally {
      await good.close();
    }
  }, 120_000);
});
