import { createServer } from 'node:http';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { drivers } from '../support/database.js';
import { verifyTwokeySignature } from '../support/fake-downstream.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/** An agent's callback receiver that can be switched off (503) and on. */
async function startReceiver() {
  const received: Array<{ body: string; signature: string | undefined; delivery: string | undefined }> = [];
  let up = false;
  let refused = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (!up) {
        refused += 1;
        return void res.writeHead(503, { 'retry-after': '0' }).end();
      }
      received.push({
        body: Buffer.concat(chunks).toString('utf8'),
        signature: req.headers['x-twokey-signature'] as string,
        delivery: req.headers['x-twokey-delivery'] as string,
      });
      res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    received,
    setUp: (value: boolean) => (up = value),
    refused: () => refused,
    close: () => server.close(),
  };
}

describe.each(drivers)('decision callbacks (%s)', (driver) => {
  let twokey: TestTwokey;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    twokey = await startTestTwokey({ driver, outboxPollMs: 20, outboxBackoff: { baseMs: 1, maxMs: 10 } });
  });
  afterAll(async () => {
    await twokey.close();
    receiver.close();
  });

  it('a receiver down for a while gets every final status once it is back, each signed', async () => {
    const { apiKey, callbackSecret } = await twokey.createAgent('hooked');
    receiver.setUp(false);
    const ids: string[] = [];
    for (const workspace of ['a', 'b', 'c']) {
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        body: { operation: 'delete_workspace', params: { workspace }, callbackUrl: receiver.url },
      });
      ids.push(proposed.body.id);
    }
    const [committedId, rejectedId, cancelledId] = ids as [string, string, string];
    await twokey.services.proposals.approve(committedId, { identity: 'web:alice', via: 'test' });
    await twokey.services.proposals.approve(committedId, { identity: 'web:bob', via: 'test' });
    await twokey.services.proposals.reject(rejectedId, { identity: 'web:alice', via: 'test' }, 'not today');
    await twokey.request('POST', `/v1/proposals/${cancelledId}/cancel`, { apiKey });

    await vi.waitFor(() => expect(receiver.refused()).toBeGreaterThanOrEqual(6), { timeout: 10_000 });
    expect(receiver.received).toHaveLength(0);
    receiver.setUp(true);

    await vi.waitFor(() => expect(receiver.received).toHaveLength(3), { timeout: 15_000 });
    const byId = new Map(receiver.received.map((r) => [(JSON.parse(r.body) as { proposal: { id: string } }).proposal.id, r]));
    for (const [id, status] of [
      [committedId, 'committed'],
      [rejectedId, 'rejected'],
      [cancelledId, 'cancelled'],
    ] as const) {
      const delivery = byId.get(id);
      expect(delivery, `callback for ${status}`).toBeDefined();
      expect(verifyTwokeySignature(callbackSecret, delivery?.signature, delivery?.body ?? '')).toBe(true);
      expect(delivery?.delivery).toBe(`${id}:${status}`);
      expect(JSON.parse(delivery?.body ?? '{}')).toMatchObject({ event: `proposal.${status}`, proposal: { id, status } });
    }
    expect(JSON.parse(byId.get(rejectedId)?.body ?? '{}').proposal.decision.reason).toBe('not today');
    expect(receiver.received.map((r) => r.body).join('')).not.toContain('tk_conf_');
  });

  it('gives up after the last attempt and keeps the job dead until an operator retries it', async () => {
    const { apiKey } = await twokey.createAgent('unlucky');
    receiver.setUp(false);
    const proposed = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: { operation: 'delete_workspace', params: { workspace: 'z' }, callbackUrl: receiver.url },
    });
    await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
    await vi.waitFor(
      async () => {
        const dead = await twokey.services.jobs.list({ status: 'dead' });
        expect(dead.some((job) => job.payload.proposalId === proposed.body.id)).toBe(true);
      },
      { timeout: 30_000 },
    );
    const [dead] = (await twokey.services.jobs.list({ status: 'dead' })).filter((job) => job.payload.proposalId === proposed.body.id);
    expect(dead?.attempts).toBe(dead?.maxAttempts);
    expect(dead?.lastError).toContain('503');

    receiver.setUp(true);
    const before = receiver.received.length;
    await twokey.services.jobs.retry(dead?.id ?? 0, new Date());
    twokey.outbox.wake();
    await vi.waitFor(() => expect(receiver.received.length).toBe(before + 1), { timeout: 10_000 });
  });
});
