import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyBaseLogger } from 'fastify';
import { isTwokeyError } from '../core/errors.js';
import type { AgentRecord } from '../core/model.js';
import type { TokenSealer } from '../core/request-identity.js';
import { isDatabaseUnavailable } from '../lib/driver-errors.js';
import { toolError, UnknownToolError, type CallContext, type McpCalls } from './calls.js';

// One tools/call as both ways in answer it (the SDK server of mcp-server.ts and the direct JSON
// path of direct-call.ts): the same wait registration, error mapping and count, so the two cannot
// drift apart. Loaded with them, at the first call over MCP.

/** What a tools/call needs from the route's dependencies: the call counter. */
export interface ToolCallDeps {
  /** Counts each answered tools/call (`twokey_mcp_tool_calls_total`). */
  countToolCall?(tool: string, outcome: string): void;
}

/** Codes whose message is meant for the caller; anything else is answered without its internals. */
const CALLER_ERRORS = new Set([
  'invalid_params',
  'invalid_request',
  'operation_not_allowed',
  'unknown_operation',
  'conflict',
  'operation_removed',
  'not_found',
]);

/** What a tools/call came to: the proposal's outcome, or why there was none. */
function outcomeOf(result: CallToolResult): string {
  const outcome = (result.structuredContent as { outcome?: unknown } | undefined)?.outcome;
  // No outcome means nothing was requested: arguments refused (schema, a secret in them).
  return typeof outcome === 'string' ? outcome : 'refused';
}

export interface ToolCallRequest {
  agent: AgentRecord;
  /** The JSON-RPC id: a later `notifications/cancelled` names it. */
  requestId: string | number;
  name: string;
  args: unknown;
  /**
   * Aborted when the client goes away: the SDK transport's signal, or the controller the direct
   * path's route aborts, which then also stands for the call in `waits` (one controller per call).
   */
  gone: AbortSignal | AbortController;
  sealer: TokenSealer;
  progress?: CallContext['progress'];
  offerUrl?: CallContext['offerUrl'];
}

/**
 * Answers one tools/call: its result, or an `McpError` thrown for a tool the agent cannot see (a
 * protocol error, as for a name not in tools/list). Caller errors and an unreachable database are
 * tool errors in words the model can act on; anything else is answered without its internals.
 */
export async function answerToolCall(
  request: ToolCallRequest,
  deps: ToolCallDeps,
  calls: McpCalls,
  waits: Map<string, AbortController>,
  log: FastifyBaseLogger,
): Promise<CallToolResult> {
  const { agent, name } = request;
  const waitKey = `${agent.id}:${String(request.requestId)}`;
  const { gone } = request;
  const cancelled = gone instanceof AbortController ? gone : new AbortController();
  waits.set(waitKey, cancelled);
  let signal: AbortSignal | undefined;
  let outcome = 'error';
  try {
    const result = await calls.call(agent, name, request.args, {
      // Made when first read, which only a call that waits for a person does: a call a rule answers
      // at once never needs it, and signals are not cheap to make (two joined by AbortSignal.any:
      // about 33 µs on a 2-core machine, more than the rest of this function).
      get signal() {
        return (signal ??= gone instanceof AbortController ? gone.signal : AbortSignal.any([gone, cancelled.signal]));
      },
      sealer: request.sealer,
      ...(request.progress ? { progress: request.progress } : {}),
      ...(request.offerUrl ? { offerUrl: request.offerUrl } : {}),
    });
    outcome = outcomeOf(result);
    return result;
  } catch (error) {
    if (error instanceof UnknownToolError) {
      outcome = 'unknown_tool';
      throw new McpError(ErrorCode.InvalidParams, error.message);
    }
    if (isTwokeyError(error) && CALLER_ERRORS.has(error.code)) {
      outcome = 'refused';
      return toolError(error.message);
    }
    if (isDatabaseUnavailable(error) || (isTwokeyError(error) && error.code === 'database_unavailable')) {
      outcome = 'database_unavailable';
      log.warn({ tool: name }, 'mcp tools/call: database unavailable');
      return toolError(
        'twokey cannot reach its database right now. Call this tool again with the same arguments in a minute: it finds the same request, never a new one.',
      );
    }
    log.error({ err: error, tool: name }, 'mcp tools/call failed');
    return toolError('twokey could not handle this call (internal error); nothing new was requested. Try again later.');
  } finally {
    if (waits.get(waitKey) === cancelled) waits.delete(waitKey);
    // A name the agent cannot see is not a label: clients choose it.
    deps.countToolCall?.(outcome === 'unknown_tool' ? '(unknown)' : name, outcome);
  }
}
