import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { once } from 'node:events';
import { eq } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mintCallbackSecret } from '../../src/core/secrets.js';
import { agents, auditEvents, disabledCallbacks, jobs } from '../../src/db/schema.js';
import { postSigned, webhookKey } from '../../src/executors/signed-post.js';
import { drivers } from '../support/database.js';
import { verifyTwokeySignature } from '../support/fake-downstream.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

type Answer = { status: number; headers?: Record<string, string> };

/** A receiver whose answers the test scripts, one per request (then 204). */
async function startReceiver() {
  const received: Array<{ body: string; headers: IncomingHttpHeaders }> = [];
  const script: Answer[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
      const answer = script.shift() ?? { status: 204 };
      res.writeHead(answer.status, answer.headers).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return { url: `http://127.0.0.1:${address.port}/hook`, received, script, close: () => new Promise((done) => server.close(done)) };
}

/** A secret as twokey minted it before round 3: the same 32 random bytes, unpadded base64url. */
const legacySecret = () => `whsec_${randomBytes(32).toString('base64url')}`;
/** What a receiver holding a pre-round-3 secret gives the standardwebhooks library: the same bytes, in base64. */
const standardFormOf = (whsec: string) => `whsec_${Buffer.from(whsec.slice('whsec_'.length), 'base64url').toString('base64')}`;
const webhookHeaders = (headers: IncomingHttpHeaders) => ({
  'webhook-id': String(headers['webhook-id']),
  'webhook-timestamp': String(headers['webhook-timestamp']),
  'webhook-signature': String(headers['webhook-signature']),
});

describe('whsec_ secrets and the standardwebhooks library', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  /** Signs one request as a callback is signed, sends it, and returns what the receiver got. */
  async function sent(secret: string, id: string) {
    const response = await postSigned({
      url: receiver.url,
      secret,
      body: JSON.stringify({ event: 'proposal.committed', id }),
      standardWebhook: { id, key: webhookKey(secret) },
      timeoutMs: 5_000,
      clock: () => new Date(),
    });
    await response.discard();
    const request = receiver.received.find((r) => r.headers['webhook-id'] === id);
    if (!request) throw new Error(`nothing received for ${id}`);
    return request;
  }

  it('mints whsec_ + standard base64 of 32 bytes, which the library takes as it is: 100 random secrets all verify', async () => {
    for (let i = 0; i < 100; i += 1) {
      const secret = mintCallbackSecret();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const request = await sent(secret, `msg_new_${i}`);
      expect(new Webhook(secret).verify(request.body, webhookHeaders(request.headers))).toEqual({ event: 'proposal.committed', id: `msg_new_${i}` });
    }
  });

  it('still signs with the key of a secret minted as base64url: 100 random ones verify in the standard form and as raw bytes', async () => {
    for (let i = 0; i < 100; i += 1) {
      const secret = legacySecret();
      const request = await sent(secret, `msg_old_${i}`);
      const headers = webhookHeaders(request.headers);
      expect(new Webhook(standardFormOf(secret)).verify(request.body, headers)).toBeTruthy();
      expect(new Webhook(Buffer.from(secret.slice(6), 'base64url'), { format: 'raw' }).verify(request.body, headers)).toBeTruthy();
      expect(verifyTwokeySignature(secret, request.headers['x-twokey-signature'] as string, request.body)).toBe(true);
    }
  });

  it('a message signed with another secret does not verify', async () => {
    const request = await sent(mintCallbackSecret(), 'msg_other');
    expect(() => new Webhook(mintCallbackSecret()).verify(request.body, webhookHeaders(request.headers))).toThrow();
  });
});

describe.each(drivers)('Standard Webhooks callbacks (%s)', (driver) => {
  let twokey: TestTwokey;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    twokey = await startTestTwokey({ driver, outboxPollMs: 20, outboxBackoff: { baseMs: 1, maxMs: 10 } });
  }, 180_000);
  afterAll(async () => {
    await twokey.close();
    await receiver.close();
  });

  async function cancelledWithCallback(apiKey: string, workspace: string): Promise<string> {
    const proposed = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: { operation: 'delete_workspace', params: { workspace }, callbackUrl: receiver.url },
    });
    expect(proposed.status).toBe(201);
    await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
    return proposed.body.id;
  }
  const requestsFor = (id: string) => receiver.received.filter((r) => r.body.includes(id));
  const jobFor = async (id: string) =>
    (await twokey.services.database.db.select().from(jobs).where(eq(jobs.kind, 'callback.deliver'))).find((job) => job.payload.proposalId === id);

  it('every retry of one event carries the same webhook-id, and each verifies with the standardwebhooks library', async () => {
    const { apiKey, callbackSecret } = await twokey.createAgent('standard');
    receiver.script.push({ status: 503, headers: { 'retry-after': '0' } });
    const id = await cancelledWithCallback(apiKey, 'sw');
    await vi.waitFor(() => expect(requestsFor(id)).toHaveLength(2), { timeout: 60_000 });

    const [refused, delivered] = requestsFor(id) as [(typeof receiver.received)[0], (typeof receiver.received)[0]];
    expect(refused.headers['webhook-id']).toBe(`${id}:cancelled`);
    expect(delivered.headers['webhook-id']).toBe(refused.headers['webhook-id']);
    // The secret as `agents create` printed it goes into the library unchanged.
    const webhook = new Webhook(callbackSecret);
    for (const request of [refused, delivered]) {
      const headers = webhookHeaders(request.headers);
      expect(webhook.verify(request.body, headers)).toMatchObject({ event: 'proposal.cancelled', proposal: { id, status: 'cancelled' } });
      // The raw-key form of the library agrees, and the twokey signature still holds.
      expect(new Webhook(Buffer.from(callbackSecret.slice(6), 'base64'), { format: 'raw' }).verify(request.body, headers)).toBeTruthy();
      expect(verifyTwokeySignature(callbackSecret, request.headers['x-twokey-signature'] as string, request.body)).toBe(true);
    }
    // Another agent's secret does not verify.
    const { callbackSecret: otherSecret } = await twokey.createAgent('other-standard');
    expect(() => new Webhook(otherSecret).verify(delivered.body, webhookHeaders(delivered.headers))).toThrow();
  }, 120_000);

  it('an agent whose secret was minted as base64url before round 3 gets callbacks its library verifies', async () => {
    const { apiKey, id: agentId } = await twokey.createAgent('before-round-3');
    const secret = legacySecret();
    await twokey.services.database.db.update(agents).set({ callbackSecret: secret }).where(eq(agents.id, agentId));
    const id = await cancelledWithCallback(apiKey, 'legacy');
    await vi.waitFor(() => expect(requestsFor(id)).toHaveLength(1), { timeout: 60_000 });
    const [request] = requestsFor(id) as [(typeof receiver.received)[0]];
    expect(new Webhook(standardFormOf(secret)).verify(request.body, webhookHeaders(request.headers))).toMatchObject({ proposal: { id } });
    expect(verifyTwokeySignature(secret, request.headers['x-twokey-signature'] as string, request.body)).toBe(true);
  }, 120_000);

  it('waits at least the Retry-After the receiver asked for', async () => {
    const { apiKey } = await twokey.createAgent('patient');
    receiver.script.push({ status: 429, headers: { 'retry-after': '120' } });
    const id = await cancelledWithCallback(apiKey, 'ra');
    await vi.waitFor(async () => expect((await jobFor(id))?.lastError).toMatch(/HTTP 429/), { timeout: 60_000 });
    const job = await jobFor(id);
    // Our own backoff is at most 10 ms here: the two minutes are the receiver's.
    expect((job?.runAt.getTime() ?? 0) - (job?.updatedAt.getTime() ?? 0)).toBe(120_000);
    expect(requestsFor(id)).toHaveLength(1);
  }, 120_000);

  it('410 Gone retires the URL for that agent: stored, audited, nothing more sent to it', async () => {
    const { apiKey, id: agentId } = await twokey.createAgent('retired');
    receiver.script.push({ status: 410 });
    const first = await cancelledWithCallback(apiKey, 'gone-1');
    await vi.waitFor(async () => expect((await jobFor(first))?.status).toBe('done'), { timeout: 60_000 });
    expect(requestsFor(first)).toHaveLength(1);

    const db = twokey.services.database.db;
    expect(await db.select().from(disabledCallbacks).where(eq(disabledCallbacks.agentId, agentId))).toEqual([
      { agentId, url: receiver.url, disabledAt: expect.any(Date) },
    ]);
    const [audit] = await db.select().from(auditEvents).where(eq(auditEvents.type, 'callback.disabled'));
    expect(audit).toMatchObject({ agentId, proposalId: first, data: { origin: new URL(receiver.url).origin, status: 410 } });

    // The next event of that agent to that URL is settled without a request.
    const second = await cancelledWithCallback(apiKey, 'gone-2');
    await vi.waitFor(async () => expect((await jobFor(second))?.status).toBe('done'), { timeout: 60_000 });
    expect(requestsFor(second)).toHaveLength(0);

    // Another agent's callbacks to the same URL still go out.
    const { apiKey: otherKey } = await twokey.createAgent('still-listening');
    const third = await cancelledWithCallback(otherKey, 'gone-3');
    await vi.waitFor(() => expect(requestsFor(third)).toHaveLength(1), { timeout: 60_000 });
  }, 120_000);
});
