import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryError } from '../../src/lib/delivery-error.js';
import { createBotConnector } from '../../src/teams/connector.js';

/** A Bot Connector and token endpoint whose next answers a test scripts, recording what arrived. */
describe('the Bot Connector client', () => {
  let server: Server;
  let base = '';
  const script: Array<{ status: number; headers?: Record<string, string>; body?: unknown }> = [];
  const received: Array<{ method: string; path: string; authorization: string | undefined; body: string }> = [];
  let tokens = 0;
  let now = 1_000_000;

  beforeAll(async () => {
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({
          method: request.method ?? '',
          path: request.url ?? '',
          authorization: request.headers.authorization,
          body: Buffer.concat(chunks).toString(),
        });
        if (request.url === '/token') {
          tokens += 1;
          return void response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: `t${tokens}`, expires_in: 3600 }));
        }
        const next = script.shift() ?? { status: 200, body: { id: 'a1' } };
        response.writeHead(next.status, { 'content-type': 'application/json', ...next.headers }).end(next.body === undefined ? '' : JSON.stringify(next.body));
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  const connector = () => createBotConnector({ appId: 'app', appPassword: 'pw-secret', tokenUrl: `${base}/token`, now: () => now, requestTimeoutMs: 5_000 });

  it('reuses its token until five minutes before it expires, then fetches another', async () => {
    const client = connector();
    const before = tokens;
    await client.createActivity(`${base}/teams/`, '19:c@thread.tacv2', { type: 'message' });
    await client.updateActivity(`${base}/teams/`, '19:c@thread.tacv2', 'a1', { type: 'message' });
    expect(tokens - before).toBe(1);
    now += 55 * 60_000 + 1;
    await client.updateActivity(`${base}/teams/`, '19:c@thread.tacv2', 'a1', { type: 'message' });
    expect(tokens - before).toBe(2);
    const put = received.filter((call) => call.method === 'PUT').at(-1);
    expect(put?.path).toBe('/teams/v3/conversations/19%3Ac%40thread.tacv2/activities/a1');
    expect(JSON.parse(put?.body ?? '{}')).toMatchObject({ id: 'a1', type: 'message' });
  });

  it('429 carries Retry-After to the outbox; 403 and 404 are permanent; 401 drops the token; no error names the secret', async () => {
    const client = connector();
    const post = () => client.createActivity(`${base}/teams`, 'conv', { type: 'message' }).catch((error: unknown) => error as DeliveryError);

    script.push({ status: 429, headers: { 'retry-after': '2' } });
    const limited = await post();
    expect(limited).toBeInstanceOf(DeliveryError);
    expect((limited as DeliveryError).options).toEqual({ retryAfterMs: 2_000 });

    script.push({ status: 403, body: { error: { code: 'BotNotInConversationRoster' } } });
    expect(((await post()) as DeliveryError).options).toEqual({ permanent: true });
    script.push({ status: 404 });
    expect(((await post()) as DeliveryError).options).toEqual({ permanent: true });

    const before = tokens;
    script.push({ status: 401 });
    const refused = (await post()) as DeliveryError;
    expect(refused.options).toEqual({});
    await post();
    expect(tokens - before).toBe(1);
    expect(`${limited}${refused}`).not.toContain('pw-secret');
  });
});
