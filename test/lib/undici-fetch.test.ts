import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { undiciFetch } from '../../src/lib/undici-fetch.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

describe('undiciFetch, the fetch handed to SDK clients', () => {
  let server: Server;
  let base: string;
  const seen: Seen[] = [];
  let answer: (response: ServerResponse) => void = (response) => response.end();

  beforeAll(async () => {
    server = createServer((request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (body += chunk));
      request.on('end', () => {
        seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
        answer(response);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(
    () =>
      new Promise<void>((done) => {
        server.close(() => done());
        // The aborted request's connection may still be open, and the shared keep-alive pool's:
        // close() alone waits for them (a CI run's hook timed out there).
        server.closeAllConnections();
      }),
  );

  it('sends the method, headers and body, and answers with the status, every header and the body', async () => {
    answer = (response) => {
      response.setHeader('content-type', 'application/json');
      response.setHeader('set-cookie', ['a=1', 'b=2']);
      response.setHeader('x-oauth-scopes', 'chat:write, commands');
      response.end('{"ok":true,"ts":"1.2"}');
    };
    const response = await undiciFetch(`${base}/api/chat.postMessage`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: 'Bearer xoxb-test' },
      body: 'channel=C1&text=hi',
    });
    expect(seen.at(-1)).toMatchObject({
      method: 'POST',
      url: '/api/chat.postMessage',
      body: 'channel=C1&text=hi',
      headers: expect.objectContaining({ 'content-type': 'application/x-www-form-urlencoded', authorization: 'Bearer xoxb-test' }),
    });
    expect([response.status, response.ok, response.url]).toEqual([200, true, `${base}/api/chat.postMessage`]);
    expect(response.headers.get('Content-Type')).toBe('application/json');
    expect(Object.fromEntries(response.headers.entries())).toMatchObject({ 'content-type': 'application/json', 'set-cookie': 'a=1, b=2' });
    expect(response.headers.get('x-oauth-scopes')).toBe('chat:write, commands');
    expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    expect(await response.json()).toEqual({ ok: true, ts: '1.2' });
    // Read once, as a Response's body is.
    await expect(response.text()).rejects.toThrow(TypeError);
  });

  it('gives what it does not keep itself (the body as a stream, a clone) from a real Response', async () => {
    answer = (response) => response.writeHead(200, { 'content-type': 'text/plain' }).end('streamed');
    const response = await undiciFetch(`${base}/stream`);
    const copy = response.clone();
    expect(copy).toBeInstanceOf(Response);
    expect(copy.headers.get('content-type')).toBe('text/plain');
    expect(await new Response(response.body).text()).toBe('streamed');
    expect(await copy.text()).toBe('streamed');
  });

  it('passes a 429 and its Retry-After through, and answers 204 with no body', async () => {
    answer = (response) => response.writeHead(429, { 'retry-after': '7' }).end('{"ok":false}');
    const limited = await undiciFetch(new URL('/limited', base), { method: 'POST', body: 'x' });
    expect([limited.status, limited.headers.get('retry-after'), await limited.text()]).toEqual([429, '7', '{"ok":false}']);

    answer = (response) => response.writeHead(204).end();
    const empty = await undiciFetch(`${base}/empty`);
    expect([empty.status, empty.body, await empty.text()]).toEqual([204, null, '']);
    expect(seen.at(-1)?.method).toBe('GET');
  });

  it('refuses a redirect, as fetch does under redirect: "error", without following it', async () => {
    answer = (response) => response.writeHead(302, { location: `${base}/elsewhere` }).end();
    const before = seen.length;
    const error = await undiciFetch(`${base}/moved`, { method: 'POST', body: 'x', redirect: 'error' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(String((error as TypeError).cause)).toContain('unexpected redirect (HTTP 302)');
    expect(seen.length - before).toBe(1);
  });

  it('stops waiting when its signal aborts', async () => {
    answer = () => {}; // never answers
    const error = await undiciFetch(`${base}/slow`, { signal: AbortSignal.timeout(50) }).catch((e: unknown) => e);
    expect((error as Error).name).toMatch(/TimeoutError|AbortError/);
  });

  it('hands what it does not cover (a Request, a FormData body) to the global fetch', async () => {
    answer = (response) => response.end('ok');
    const global = vi.spyOn(globalThis, 'fetch');
    try {
      const form = new FormData();
      form.append('file', new Blob(['data']), 'a.txt');
      expect((await undiciFetch(`${base}/upload`, { method: 'POST', body: form })).status).toBe(200);
      expect(seen.at(-1)?.body).toContain('filename="a.txt"');
      expect(global).toHaveBeenCalledTimes(1);
      await undiciFetch(`${base}/plain`, { method: 'POST', body: 'x' });
      expect(global).toHaveBeenCalledTimes(1);
    } finally {
      global.mockRestore();
    }
  });
});
