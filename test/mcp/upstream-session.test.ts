import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstreamClient, type UpstreamClient } from '../../src/mcp/upstream-client.js';

/**
 * An upstream with sessions (the SDK's stateful Streamable HTTP transport, JSON answers), which can
 * forget them all as a restarted server would: a request with a forgotten session id gets the SDK's
 * 404. Every POST's headers and JSON-RPC method are kept.
 */
async function startSessionUpstream() {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const posts: Array<{ method: string; headers: IncomingHttpHeaders }> = [];
  const http: HttpServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const body = text ? (JSON.parse(text) as { method?: string }) : undefined;
        if (req.method === 'POST') posts.push({ method: body?.method ?? '', headers: req.headers });
        const id = req.headers['mcp-session-id'];
        let transport = typeof id === 'string' ? sessions.get(id) : undefined;
        if (!transport && body?.method === 'initialize') {
          // The low-level server: it sends what the handler returns, even a result its own schema refuses.
          const server = new Server({ name: 'sessions', version: '1.0.0' }, { capabilities: { tools: {} } });
          const outputSchema = { type: 'object' as const, properties: { text: { type: 'string' } }, required: ['text'] };
          server.setRequestHandler(ListToolsRequestSchema, () => ({
            tools: [
              { name: 'read_note', inputSchema: { type: 'object' as const, properties: { name: { type: 'string' } } }, outputSchema },
              { name: 'liar', inputSchema: { type: 'object' as const }, outputSchema },
            ],
          }));
          server.setRequestHandler(CallToolRequestSchema, (request) => {
            if (request.params.name === 'liar') return { content: [{ type: 'text', text: '7' }], structuredContent: { text: 7 } };
            const text = `note ${String(request.params.arguments?.name)}`;
            return { content: [{ type: 'text', text }], structuredContent: { text } };
          });
          const created = new StreamableHTTPServerTransport({
            sessionIdGenerator: randomUUID,
            enableJsonResponse: true,
            onsessioninitialized: (sessionId) => void sessions.set(sessionId, created),
          });
          await server.connect(created);
          transport = created;
        }
        if (!transport) {
          res
            .writeHead(404, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
          return;
        }
        await transport.handleRequest(req, res, body);
      })();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    posts,
    forgetSessions: () => sessions.clear(),
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

describe('an HTTP upstream with sessions, called directly', () => {
  let upstream: Awaited<ReturnType<typeof startSessionUpstream>>;
  let client: UpstreamClient;

  beforeAll(async () => {
    upstream = await startSessionUpstream();
    client = createUpstreamClient({ name: 'sessions', url: upstream.url, headers: { 'X-Api-Key': 'k' }, timeoutMs: 10_000, maxResponseBytes: 1024 * 1024 });
  });
  afterAll(async () => {
    await client?.close();
    await upstream?.close();
  });

  it('sends the session id, the negotiated protocol version and the config’s headers on each call', async () => {
    const result = await client.callTool('read_note', { name: 'a' }, { 'io.twokey/idempotency-key': 'prp_1' });
    expect(result).toEqual({ content: [{ type: 'text', text: 'note a' }], structuredContent: { text: 'note a' } });
    const initialize = upstream.posts.find((post) => post.method === 'initialize');
    const call = upstream.posts.findLast((post) => post.method === 'tools/call');
    expect(call?.headers['mcp-session-id']).toEqual(expect.any(String));
    expect(call?.headers['mcp-protocol-version']).toEqual(expect.any(String));
    expect(initialize?.headers['mcp-session-id']).toBeUndefined();
    expect(call?.headers['x-api-key']).toBe('k');
    expect(call?.headers.accept).toBe('application/json, text/event-stream');
  });

  it('opens a new session and sends the call again when the upstream forgot its session (404)', async () => {
    const before = upstream.posts.filter((post) => post.method === 'initialize').length;
    const firstSession = upstream.posts.findLast((post) => post.method === 'tools/call')?.headers['mcp-session-id'];
    upstream.forgetSessions();
    const result = await client.callTool('read_note', { name: 'b' });
    expect(result.structuredContent).toEqual({ text: 'note b' });
    expect(upstream.posts.filter((post) => post.method === 'initialize').length).toBe(before + 1);
    const calls = upstream.posts.filter((post) => post.method === 'tools/call');
    expect(calls.at(-2)?.headers['mcp-session-id']).toBe(firstSession);
    expect(calls.at(-1)?.headers['mcp-session-id']).not.toBe(firstSession);
  });

  it('refuses structured content that breaks the tool’s output schema, in the SDK client’s words', async () => {
    await expect(client.callTool('liar', {})).rejects.toThrow(/Structured content does not match the tool's output schema/);
  });
});
