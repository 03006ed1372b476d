import { createServer, type IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Twokey } from '@twokey/client';

// The SDK has no dependency, so trace context reaches it through a headers hook the caller fills
// from its own tracer. A local server stands in for twokey: only what goes over the wire matters here.
describe('the SDK headers hook', () => {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((request, response) => {
    seen.push(request.headers);
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ operations: [] }));
  });
  let baseUrl = '';

  beforeAll(async () => {
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const address = server.address();
    baseUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(() => new Promise<void>((closed) => server.close(() => closed())));

  it('asks for the headers on every request, so each carries the span current at that moment', async () => {
    let span = 0;
    const client = new Twokey({
      baseUrl,
      apiKey: 'tk_agent_example',
      headers: () => ({ traceparent: `00-${'a'.repeat(32)}-${String((span += 1)).padStart(16, '0')}-01` }),
    });
    await client.operations();
    await client.operations();
    expect(seen.map((headers) => headers.traceparent)).toEqual([`00-${'a'.repeat(32)}-0000000000000001-01`, `00-${'a'.repeat(32)}-0000000000000002-01`]);
  });

  it('cannot replace the agent key or the headers a call sets', async () => {
    const client = new Twokey({ baseUrl, apiKey: 'tk_agent_example', headers: () => ({ authorization: 'Bearer forged', accept: 'text/html' }) });
    await client.operations();
    expect(seen.at(-1)).toMatchObject({ authorization: 'Bearer tk_agent_example', accept: 'application/json' });
  });
});
