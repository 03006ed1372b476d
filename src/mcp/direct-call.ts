import type { IncomingHttpHeaders } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { ErrorCode, RELATED_TASK_META_KEY, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyBaseLogger } from 'fastify';
import type { McpCalls } from './calls.js';
import { answerToolCall, type ToolCallDeps, type ToolCallRequest } from './tool-call.js';

// The common call answered without the SDK's server and transport: one tools/call of a tool no human
// decides, whose answer is one JSON body. Building a Server and a Streamable HTTP transport for it
// (web Request and Response around node's, every message parsed by its zod schema twice) costs more
// than the rest of the call. Only a request the SDK transport would accept as it is comes here; any
// other (wrong headers, a malformed message, a batch, a progress token, a task) goes to the SDK,
// which answers it with its own status, code and words.

/** A tools/call the direct path answers. */
export interface DirectToolCall {
  id: string | number;
  name: string;
  args: Record<string, unknown> | undefined;
}

const REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One header as the web `Headers` the SDK reads would give it (repeated values joined). */
function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * The call, when the SDK transport and server would take this request as it is: the Accept and
 * Content-Type the Streamable HTTP spec requires, a protocol version the SDK supports (or none), and
 * a well-formed JSON-RPC `tools/call` request (the SDK's strict request shape) without a progress
 * token, a task or a related task. Null sends the request to the SDK.
 */
export function directToolCall(headers: IncomingHttpHeaders, body: unknown): DirectToolCall | null {
  const accept = header(headers, 'accept');
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream')) return null;
  if (!isJsonContentType(header(headers, 'content-type'))) return null;
  const version = header(headers, 'mcp-protocol-version');
  if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return null;

  if (!isPlainObject(body) || Object.keys(body).some((key) => !REQUEST_KEYS.has(key))) return null;
  const { jsonrpc, id, method, params } = body;
  if (jsonrpc !== '2.0' || method !== 'tools/call') return null;
  if (typeof id !== 'string' && !Number.isSafeInteger(id)) return null;
  if (!isPlainObject(params) || typeof params.name !== 'string' || params.task !== undefined) return null;
  const args = params.arguments;
  if (args !== undefined && !isPlainObject(args)) return null;
  const meta = params._meta;
  if (meta !== undefined && (!isPlainObject(meta) || meta.progressToken !== undefined || meta[RELATED_TASK_META_KEY] !== undefined)) return null;
  return { id: id as string | number, name: params.name, args };
}

/**
 * The JSON-RPC response the SDK server would send for this call, as the text of the body: the
 * result, or the error of a tool the agent cannot see (in the SDK's key order and words).
 */
export async function answerDirectly(
  call: DirectToolCall,
  request: Omit<ToolCallRequest, 'requestId' | 'name' | 'args'>,
  deps: ToolCallDeps,
  calls: McpCalls,
  waits: Map<string, AbortController>,
  log: FastifyBaseLogger,
): Promise<string> {
  try {
    const result = await answerToolCall({ ...request, requestId: call.id, name: call.name, args: call.args }, deps, calls, waits, log);
    return JSON.stringify({ result, jsonrpc: '2.0', id: call.id });
  } catch (error) {
    // As the SDK's protocol layer turns a handler's error into a JSON-RPC error.
    const { code, message, data } = error as { code?: unknown; message?: string; data?: unknown };
    return JSON.stringify({
      jsonrpc: '2.0',
      id: call.id,
      error: {
        code: Number.isSafeInteger(code) ? code : ErrorCode.InternalError,
        message: message ?? 'Internal error',
        ...(data !== undefined ? { data } : {}),
      },
    });
  }
}
