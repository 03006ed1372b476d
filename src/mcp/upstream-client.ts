import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpConnection } from '../config/config-file.js';
import { injectTrace } from '../tracing/index.js';

/** Why an upstream call failed, in words safe to record on the proposal (no URL, header or env value). */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
}

/**
 * A fetch whose answers stop at `maxBytes`: the SDK reads a whole response before parsing it, so a
 * 50 MB answer must be cut off here, while it streams, not after it has filled memory.
 */
function boundedFetch(maxBytes: number, onOversize: (error: UpstreamError) => void): typeof fetch {
  return async (input, init) => {
    // The upstream joins the trace of the span this call runs in (the execute span).
    const headers = new Headers(init?.headers);
    injectTrace(headers);
    const response = await fetch(input, { ...init, headers });
    if (!response.body) return response;
    const tooLarge = () => {
      const error = new UpstreamError(`the upstream answer is larger than ${maxBytes} bytes`);
      // The SDK reports a broken stream to onerror only; the waiting call must fail now, not at its timeout.
      onOversize(error);
      return error;
    };
    const declared = Number(response.headers.get('content-length') ?? 0);
    if (declared > maxBytes) {
      await response.body.cancel().catch(() => undefined);
      throw tooLarge();
    }
    let seen = 0;
    const limited = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > maxBytes) controller.error(tooLarge());
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(limited, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

function describe(error: unknown, connection: McpConnection): string {
  if (error instanceof UpstreamError) return error.message;
  const cause = error instanceof Error && error.cause instanceof UpstreamError ? error.cause : null;
  if (cause) return cause.message;
  const message = error instanceof Error ? error.message : String(error);
  if (/timed out|timeout/i.test(message)) return `the upstream did not answer within ${connection.timeoutMs} ms`;
  if (/larger than/.test(message)) return message.replace(/^.*?(the upstream answer is larger than \d+ bytes).*$/s, '$1');
  // SDK messages can quote the URL; keep the kind of failure only.
  return `the upstream call failed: ${message.replace(/https?:\/\/\S+/g, '<upstream>').slice(0, 300)}`;
}

let clientSdkLoading: Promise<{
  Client: typeof Client;
  StdioClientTransport: typeof StdioClientTransport;
  StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport;
}> | null = null;
/**
 * The MCP SDK's client, loaded at the first connection rather than at start: a server with no
 * upstreams and no `mcp` executor never loads it, and one with them loads it while connecting.
 */
function clientSdk() {
  clientSdkLoading ??= Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]).then(([{ Client }, { StdioClientTransport }, { StreamableHTTPClientTransport }]) => ({ Client, StdioClientTransport, StreamableHTTPClientTransport }));
  return clientSdkLoading;
}

export interface UpstreamClient {
  listTools(): Promise<Tool[]>;
  callTool(name: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/**
 * One long-lived client per connection (one child process per stdio upstream), reconnected after a
 * failure. Calls are bounded: the connection's timeout, and its maximum answer size on HTTP.
 */
export function createUpstreamClient(connection: McpConnection): UpstreamClient {
  let connecting: Promise<Client> | null = null;
  const inFlight = new Set<AbortController>();
  const abortInFlight = (error: UpstreamError) => {
    for (const call of inFlight) call.abort(error);
  };

  async function open(): Promise<Client> {
    const { Client, StdioClientTransport, StreamableHTTPClientTransport } = await clientSdk();
    const client = new Client({ name: 'twokey', version: '1' }, { capabilities: {} });
    const transport = connection.url
      ? new StreamableHTTPClientTransport(new URL(connection.url), {
          requestInit: { headers: connection.headers ?? {} },
          fetch: boundedFetch(connection.maxResponseBytes, abortInFlight),
        })
      : new StdioClientTransport({
          command: connection.command ?? '',
          args: connection.args ?? [],
          // The child gets only what the config gives it, plus PATH to find its interpreter.
          env: { ...(process.env.PATH ? { PATH: process.env.PATH } : {}), ...connection.env },
          stderr: 'ignore',
        });
    client.onclose = () => {
      connecting = null;
    };
    await client.connect(transport, { timeout: connection.timeoutMs });
    // Caches every tool's output schema: the SDK then refuses structured results that do not match.
    await client.listTools(undefined, { timeout: connection.timeoutMs });
    return client;
  }

  function current(): Promise<Client> {
    connecting ??= open().catch((error: unknown) => {
      connecting = null;
      throw error;
    });
    return connecting;
  }

  async function dropAfter(error: unknown): Promise<never> {
    const failing = connecting;
    connecting = null;
    await failing?.then((client) => client.close()).catch(() => undefined);
    throw new UpstreamError(describe(error, connection));
  }

  return {
    async listTools() {
      try {
        const client = await current();
        const tools: Tool[] = [];
        let cursor: string | undefined;
        do {
          const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: connection.timeoutMs });
          tools.push(...page.tools);
          cursor = page.nextCursor;
        } while (cursor);
        return tools;
      } catch (error) {
        return dropAfter(error);
      }
    },
    async callTool(name, args, meta) {
      let result: CallToolResult;
      const call = new AbortController();
      inFlight.add(call);
      try {
        const client = await current();
        result = (await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) }, undefined, {
          timeout: connection.timeoutMs,
          signal: call.signal,
        })) as CallToolResult;
      } catch (error) {
        return dropAfter(call.signal.aborted ? call.signal.reason : error);
      } finally {
        inFlight.delete(call);
      }
      // stdio answers are not cut off while they stream; refuse them here all the same.
      const size = Buffer.byteLength(JSON.stringify(result));
      if (size > connection.maxResponseBytes) throw new UpstreamError(`the upstream answer is larger than ${connection.maxResponseBytes} bytes`);
      return result;
    },
    async close() {
      const open = connecting;
      connecting = null;
      await open?.then((client) => client.close()).catch(() => undefined);
    },
  };
}
