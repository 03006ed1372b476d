import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, CallToolResultSchema, ErrorCode, McpError, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type * as EventSourceParser from 'eventsource-parser';
import type * as Undici from 'undici';
import type { McpConnection } from '../config/config-file.js';
import { injectTrace } from '../tracing/index.js';
import { withDeadline } from '../lib/timeouts.js';

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

type ClientSdk = {
  Client: typeof Client;
  StdioClientTransport: typeof StdioClientTransport;
  StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport;
  McpError: typeof McpError;
  ErrorCode: typeof ErrorCode;
  CallToolResultSchema: typeof CallToolResultSchema;
  /** One schema validator for every upstream's tools: each compiled output schema is kept per tool. */
  validator: AjvJsonSchemaValidator;
};

let clientSdkLoading: Promise<ClientSdk> | null = null;
/**
 * The MCP SDK's client, loaded at the first connection rather than at start: a server with no
 * upstreams and no `mcp` executor never loads it, and one with them loads it while connecting.
 */
function clientSdk(): Promise<ClientSdk> {
  clientSdkLoading ??= Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
    import('@modelcontextprotocol/sdk/validation/ajv'),
  ]).then(
    ([{ Client }, { StdioClientTransport }, { StreamableHTTPClientTransport }, { McpError, ErrorCode, CallToolResultSchema }, { AjvJsonSchemaValidator }]) => ({
      Client,
      StdioClientTransport,
      StreamableHTTPClientTransport,
      McpError,
      ErrorCode,
      CallToolResultSchema,
      validator: new AjvJsonSchemaValidator(),
    }),
  );
  return clientSdkLoading;
}

/** Loaded with the first SSE answer; kept, as a dynamic import per call goes through the module loader again. */
let sseParser: Promise<typeof EventSourceParser> | null = null;

/** A JSON-RPC message as read off the wire, before its result is checked. */
interface JsonRpcAnswer {
  id?: unknown;
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

function answerTo(id: number, message: unknown): JsonRpcAnswer | undefined {
  const candidates: unknown[] = Array.isArray(message) ? message : [message];
  return candidates.find(
    (candidate): candidate is JsonRpcAnswer =>
      typeof candidate === 'object' && candidate !== null && (candidate as JsonRpcAnswer).id === id && ('result' in candidate || 'error' in candidate),
  );
}

/**
 * Reads the answer to request `id` from an upstream's response body, JSON or an SSE stream (the two
 * the Streamable HTTP spec allows), never more than `maxBytes` of it: the body is cut off while it
 * streams, not after it has filled memory. An SSE stream answers as soon as the response arrives;
 * the notifications before it are not for twokey (it sends no progress token), and the rest of the
 * stream is read to its end without waiting for it, so the connection goes back to the pool (the
 * request's timeout still ends a stream the upstream keeps open).
 */
async function readAnswer(
  body: Undici.Dispatcher.ResponseData['body'],
  contentType: string,
  id: number,
  maxBytes: number,
  tooLarge: () => UpstreamError,
): Promise<JsonRpcAnswer> {
  const { createParser } = await (sseParser ??= import('eventsource-parser'));
  return new Promise<JsonRpcAnswer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let seen = 0;
    let settled = false;
    const settle = (outcome: () => JsonRpcAnswer) => {
      if (settled) return;
      settled = true;
      try {
        resolve(outcome());
      } catch (error) {
        reject(error);
        body.destroy();
      }
    };
    const decoder = new TextDecoder();
    const parser =
      contentType === 'text/event-stream'
        ? createParser({
            onEvent: (event) => {
              if (settled || (event.event !== undefined && event.event !== 'message')) return;
              let message: unknown;
              try {
                message = JSON.parse(event.data);
              } catch (error) {
                settle(() => {
                  throw error;
                });
                return;
              }
              const found = answerTo(id, message);
              if (found) settle(() => found);
            },
          })
        : null;
    body.on('data', (chunk: Buffer) => {
      if (settled) return;
      seen += chunk.byteLength;
      if (seen > maxBytes) {
        settle(() => {
          throw tooLarge();
        });
        return;
      }
      if (parser) parser.feed(decoder.decode(chunk, { stream: true }));
      else chunks.push(chunk);
    });
    body.on('end', () =>
      settle(() => {
        const found = parser ? undefined : answerTo(id, JSON.parse(Buffer.concat(chunks).toString('utf8')));
        if (!found) throw new UpstreamError('the upstream closed its answer without a response to the call');
        return found;
      }),
    );
    body.on('error', (error) =>
      settle(() => {
        throw error;
      }),
    );
  });
}

/** At most `maxBytes` of an error answer's body, as text. */
async function boundedText(body: Undici.Dispatcher.ResponseData['body'], maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let seen = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    seen += chunk.byteLength;
    if (seen > maxBytes) break;
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, 1_000);
}

/** What the SDK client checks of a tools/call result: its shape, and the tool's output schema. */
async function checkedResult(name: string, answer: JsonRpcAnswer, outputValidators: Map<string, JsonSchemaValidator<unknown>>): Promise<CallToolResult> {
  const { McpError, ErrorCode, CallToolResultSchema } = await clientSdk();
  if (answer.error) {
    const { code, message, data } = answer.error;
    throw new McpError(typeof code === 'number' ? code : ErrorCode.InternalError, typeof message === 'string' ? message : 'Internal error', data);
  }
  const parsed = CallToolResultSchema.safeParse(answer.result);
  if (!parsed.success) throw parsed.error;
  const result = parsed.data;
  const validator = outputValidators.get(name);
  if (validator) {
    if (!result.structuredContent && !result.isError) {
      throw new McpError(ErrorCode.InvalidRequest, `Tool ${name} has an output schema but did not return structured content`);
    }
    if (result.structuredContent) {
      const validation = validator(result.structuredContent);
      if (!validation.valid)
        throw new McpError(ErrorCode.InvalidParams, `Structured content does not match the tool's output schema: ${validation.errorMessage}`);
    }
  }
  return result;
}

/** The headers the SDK transport sends on a POST: the config's, then the content types, session and protocol version. */
function callHeaders(connection: McpConnection, http: StreamableHTTPClientTransport): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(connection.headers ?? {})) headers[key.toLowerCase()] = value;
  headers['content-type'] = 'application/json';
  headers.accept = 'application/json, text/event-stream';
  if (http.sessionId) headers['mcp-session-id'] = http.sessionId;
  if (http.protocolVersion) headers['mcp-protocol-version'] = http.protocolVersion;
  // The upstream joins the trace of the span this call runs in (the execute span).
  injectTrace(headers);
  return headers;
}

export interface UpstreamClient {
  listTools(): Promise<Tool[]>;
  callTool(name: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** The SDK client of one connection, and what a direct HTTP call needs from its initialize. */
interface Connected {
  client: Client;
  /** HTTP only: its session id and negotiated protocol version go on every direct call. */
  http?: StreamableHTTPClientTransport;
  /** Every tool's compiled output schema, by name (the SDK client's own check, kept for direct calls). */
  outputValidators: Map<string, JsonSchemaValidator<unknown>>;
}

/**
 * One long-lived client per connection (one child process per stdio upstream), reconnected after a
 * failure. Calls are bounded: the connection's timeout, and its maximum answer size on HTTP.
 *
 * The SDK client connects (initialize, the session, the tools and their output schemas). On HTTP a
 * tools/call is then one POST sent here on a keep-alive pool rather than through the SDK's
 * transport (global fetch, web streams, every message parsed twice): the same headers (session,
 * protocol version, the config's, the trace), the same result check and output-schema check, the
 * same failures in the same words.
 */
export function createUpstreamClient(connection: McpConnection): UpstreamClient {
  let connecting: Promise<Connected> | null = null;
  let pool: Undici.Pool | null = null;
  /** Where a tools/call POST goes, on HTTP: read once, not for every call. */
  const endpoint = connection.url ? new URL(connection.url) : null;
  let nextId = 0;
  const inFlight = new Set<AbortController>();
  const abortInFlight = (error: UpstreamError) => {
    for (const call of inFlight) call.abort(error);
  };
  const tooLarge = () => new UpstreamError(`the upstream answer is larger than ${connection.maxResponseBytes} bytes`);

  async function open(): Promise<Connected> {
    const { Client, StdioClientTransport, StreamableHTTPClientTransport, validator } = await clientSdk();
    const client = new Client({ name: 'twokey', version: '1' }, { capabilities: {}, jsonSchemaValidator: validator });
    const http = connection.url
      ? new StreamableHTTPClientTransport(new URL(connection.url), {
          requestInit: { headers: connection.headers ?? {} },
          fetch: boundedFetch(connection.maxResponseBytes, abortInFlight),
        })
      : undefined;
    const transport =
      http ??
      new StdioClientTransport({
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
    // Caches every tool's output schema: structured results that do not match are refused.
    const outputValidators = new Map<string, JsonSchemaValidator<unknown>>();
    for (const tool of await everyTool(client)) if (tool.outputSchema) outputValidators.set(tool.name, validator.getValidator(tool.outputSchema));
    return { client, ...(http ? { http } : {}), outputValidators };
  }

  /** Every page of the upstream's tools/list. */
  async function everyTool(client: Client): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: connection.timeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  function current(): Promise<Connected> {
    connecting ??= open().catch((error: unknown) => {
      connecting = null;
      throw error;
    });
    return connecting;
  }

  async function drop(): Promise<void> {
    const failing = connecting;
    connecting = null;
    await failing?.then(({ client }) => client.close()).catch(() => undefined);
  }

  async function dropAfter(error: unknown): Promise<never> {
    await drop();
    throw new UpstreamError(describe(error, connection));
  }

  /**
   * One tools/call POST. A 404 to a request that carried a session id means the upstream forgot the
   * session: the spec's answer is a new initialize, so the connection is opened again and the call
   * sent once more (the upstream did not run it).
   */
  async function postToolCall(
    url: URL,
    name: string,
    args: Record<string, unknown>,
    meta: Record<string, unknown> | undefined,
    retried = false,
  ): Promise<CallToolResult> {
    const connected = await current();
    const http = connected.http!;
    if (!pool) {
      const { Pool } = await import('undici');
      pool = new Pool(url.origin);
    }
    const upstream = pool;
    const headers = callHeaders(connection, http);
    const id = ++nextId;
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } });
    // A deadline cleared when the call ends: AbortSignal.timeout's timer would stay armed for the
    // whole timeout after its call answered (thousands at once under load).
    return withDeadline(
      connection.timeoutMs,
      async (signal) => {
        const response = await upstream.request({ path: url.pathname + url.search, method: 'POST', headers, body, signal });
        const contentType = (String(response.headers['content-type'] ?? '').split(';')[0] ?? '').trim().toLowerCase();
        if (response.statusCode === 404 && headers['mcp-session-id'] && !retried) {
          await response.body.dump();
          await drop();
          return postToolCall(url, name, args, meta, true);
        }
        if (response.statusCode < 200 || response.statusCode >= 300) {
          const text = await boundedText(response.body, connection.maxResponseBytes).catch(() => null);
          throw new Error(`Streamable HTTP error: Error POSTing to endpoint: ${text}`);
        }
        if (Number(response.headers['content-length'] ?? 0) > connection.maxResponseBytes) {
          response.body.destroy();
          throw tooLarge();
        }
        if (contentType !== 'application/json' && contentType !== 'text/event-stream') {
          await response.body.dump();
          throw new Error(`Streamable HTTP error: Unexpected content type: ${contentType}`);
        }
        const answer = await readAnswer(response.body, contentType, id, connection.maxResponseBytes, tooLarge);
        return await checkedResult(name, answer, connected.outputValidators);
      },
      () => new UpstreamError(`the upstream did not answer within ${connection.timeoutMs} ms`),
    );
  }

  return {
    async listTools() {
      try {
        return await everyTool((await current()).client);
      } catch (error) {
        return dropAfter(error);
      }
    },
    async callTool(name, args, meta) {
      if (endpoint) {
        try {
          return await postToolCall(endpoint, name, args, meta);
        } catch (error) {
          return dropAfter(error);
        }
      }
      let result: CallToolResult;
      const call = new AbortController();
      inFlight.add(call);
      try {
        const { client } = await current();
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
      if (size > connection.maxResponseBytes) throw tooLarge();
      return result;
    },
    async close() {
      await drop();
      const open = pool;
      pool = null;
      await open?.close().catch(() => undefined);
    },
  };
}
