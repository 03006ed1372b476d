import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type ClientCapabilities, type Tool } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import type { TestTwokey } from '../support/twokey.js';

export interface UpstreamCall {
  tool: string;
  args: Record<string, unknown>;
  meta: Record<string, unknown> | undefined;
}

export interface FakeUpstream {
  url: string;
  calls: UpstreamCall[];
  /** Requests refused for a wrong Authorization header. */
  refused: number;
  /** The headers of every accepted request, in order. */
  headers: IncomingHttpHeaders[];
  /** Lets every call of `hang` waiting so far answer. */
  releaseHanging(): void;
  close(): Promise<void>;
}

/**
 * twokey's configuration importing the fake upstream's notes with `read_note` passed straight
 * through (read-only: a rule decides it, no human), as the pass-through tests and bench/mcp.ts use it.
 */
export function readOnlyNotesConfig(upstream: Pick<FakeUpstream, 'url'>, token: string, approver = 'web:alice'): string {
  return `
upstreams:
  - name: notes
    url: ${upstream.url}
    headers: { authorization: "Bearer ${token}" }
    approval: { approvers: [${approver}] }
    tools:
      read_note: { readOnly: true }
`;
}

/**
 * A real MCP server (the SDK's McpServer over Streamable HTTP on 127.0.0.1) standing for a service
 * twokey guards: notes that can be read (read-only) and deleted (destructive), plus misbehaving tools.
 */
export async function startFakeUpstream(options: { token: string; hugeBytes?: number }): Promise<FakeUpstream> {
  const calls: UpstreamCall[] = [];
  const notes = new Map([
    ['groceries', 'milk, eggs'],
    ['todo', 'ship it'],
  ]);
  const hanging: Array<() => void> = [];
  let flakyFailures = 1;
  const state = { refused: 0 };
  const headers: IncomingHttpHeaders[] = [];

  function build(): McpServer {
    const server = new McpServer({ name: 'notes', version: '1.0.0' });
    const record = (tool: string, args: Record<string, unknown>, meta: Record<string, unknown> | undefined) => calls.push({ tool, args, meta });
    server.registerTool(
      'read_note',
      { description: 'Read a note', inputSchema: { name: z.string() }, annotations: { readOnlyHint: true } },
      async (args, extra) => {
        record('read_note', args, extra._meta);
        return { content: [{ type: 'text', text: notes.get(args.name) ?? '(no such note)' }] };
      },
    );
    server.registerTool(
      'delete_note',
      {
        description: 'Delete a note for good',
        inputSchema: { name: z.string() },
        outputSchema: { deleted: z.string() },
        annotations: { destructiveHint: true },
      },
      async (args, extra) => {
        record('delete_note', args, extra._meta);
        notes.delete(args.name);
        return { content: [{ type: 'text', text: `deleted ${args.name}` }], structuredContent: { deleted: args.name } };
      },
    );
    server.registerTool('hang', { description: 'Never answers', inputSchema: { name: z.string() } }, async (args, extra) => {
      record('hang', args, extra._meta);
      await new Promise<void>((resolve) => hanging.push(resolve));
      return { content: [{ type: 'text', text: 'too late' }] };
    });
    server.registerTool('huge', { description: 'Answers with 8 MB', inputSchema: { name: z.string() } }, async (args, extra) => {
      record('huge', args, extra._meta);
      return { content: [{ type: 'text', text: 'x'.repeat(options.hugeBytes ?? 8 * 1024 * 1024) }] };
    });
    server.registerTool(
      'liar',
      { description: 'Promises a number, answers a word', inputSchema: { name: z.string() }, outputSchema: { count: z.number() } },
      async (args, extra) => {
        record('liar', args, extra._meta);
        return { content: [{ type: 'text', text: 'many' }], structuredContent: { count: 'many' } as unknown as { count: number } };
      },
    );
    server.registerTool('flaky', { description: 'Fails once, then works', inputSchema: { name: z.string() } }, async (args, extra) => {
      record('flaky', args, extra._meta);
      if (flakyFailures-- > 0) return { isError: true, content: [{ type: 'text', text: 'backend unavailable' }] };
      return { content: [{ type: 'text', text: 'ok' }] };
    });
    return server;
  }

  const served = await serveMcp(options.token, build, state, headers);
  const releaseHanging = () => {
    for (const release of hanging.splice(0)) release();
  };
  return {
    url: served.url,
    calls,
    headers,
    get refused() {
      return state.refused;
    },
    releaseHanging,
    async close() {
      releaseHanging();
      await served.close();
    },
  };
}

/**
 * An MCP server over stateless Streamable HTTP on 127.0.0.1, a new SDK server per request (as
 * twokey's own is), refusing requests without the bearer token.
 */
async function serveMcp(
  token: string,
  build: () => McpServer | Server,
  state: { refused: number },
  headers: IncomingHttpHeaders[],
): Promise<{ url: string; close(): Promise<void> }> {
  const http: HttpServer = createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${token}`) {
      state.refused += 1;
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    headers.push(req.headers);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const server = build();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        const text = Buffer.concat(chunks).toString('utf8');
        await transport.handleRequest(req, res, text ? JSON.parse(text) : undefined);
      })();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

export interface RawUpstream {
  url: string;
  /** Every tools/call it received, with the arguments exactly as they arrived. */
  calls: UpstreamCall[];
  close(): Promise<void>;
}

/**
 * An upstream that declares its tools as raw MCP tool objects (any JSON Schema, any annotations,
 * titles and descriptions), through the SDK's low-level Server: it stands for a server twokey must
 * not take at its word. Every call answers `{received: <its arguments>}`.
 */
export async function startRawUpstream(options: { token: string; tools: Tool[] }): Promise<RawUpstream> {
  const calls: UpstreamCall[] = [];
  const build = () => {
    const server = new Server({ name: 'raw', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: options.tools }));
    server.setRequestHandler(CallToolRequestSchema, (request) => {
      const args = request.params.arguments ?? {};
      calls.push({ tool: request.params.name, args, meta: request.params._meta });
      return { content: [{ type: 'text', text: 'ok' }], structuredContent: { received: args } };
    });
    return server;
  };
  const served = await serveMcp(options.token, build, { refused: 0 }, []);
  return { url: served.url, calls, close: () => served.close() };
}

/** twokey's fastify app listening on a loopback port, for real MCP clients. */
export async function listen(twokey: TestTwokey): Promise<string> {
  const address = await twokey.app.listen({ host: '127.0.0.1', port: 0 });
  return `${address}/mcp`;
}

export async function connectClient(url: string, apiKey: string, capabilities: ClientCapabilities = {}): Promise<Client> {
  const client = new Client({ name: 'test-client', version: '1.0.0' }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } }));
  return client;
}

/** Resolves once `condition` holds, checking after every change twokey makes (no fixed sleeps). */
export async function until<T>(read: () => Promise<T | undefined | null | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
