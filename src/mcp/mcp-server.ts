import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { FastifyBaseLogger } from 'fastify';
import { isTwokeyError } from '../core/errors.js';
import { isDatabaseUnavailable } from '../lib/driver-errors.js';
import type { AgentRecord } from '../core/model.js';
import type { TokenSealer } from '../core/request-identity.js';
import { toolError, UnknownToolError, type McpCalls } from './calls.js';
import type { McpServices } from './ports.js';
import { toolsFor } from './tools.js';

// The MCP SDK's server for one `POST /mcp` request. Apart from the route, which imports it at the
// first call: the SDK is not loaded by a server that is never asked over MCP.

/** What the server takes from the route's dependencies: the tools' operations and the call counter. */
export interface McpServerDeps extends Pick<McpServices, 'operations'> {
  countToolCall?(tool: string, outcome: string): void;
}

export { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

const SERVER_INFO = { name: 'twokey', version: '0.1.0' };
const INSTRUCTIONS =
  'Every tool here asks a human before it acts. A call waits for the decision and answers with its outcome. ' +
  'When the outcome is "pending", call the same tool again with the same arguments: it returns the same request, never a new one. ' +
  'When it is "denied" or "expired", the action did not happen: do not retry it or work around it.';

/**
 * One validator for every request's server: left to itself, each `Server` builds an Ajv instance of
 * its own (every keyword and format added again), a cost per call for a validator used only by
 * form-mode elicitation, which twokey never sends.
 */
const SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

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

/** A new low-level server per request: nothing lives between requests, so any replica answers any call. */
export function buildServer(
  agent: AgentRecord,
  sealer: TokenSealer,
  deps: McpServerDeps,
  calls: McpCalls,
  waits: Map<string, AbortController>,
  log: FastifyBaseLogger,
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: false } },
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: SCHEMA_VALIDATOR,
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: toolsFor(agent, deps.operations()) }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const progressToken = request.params._meta?.progressToken;
    const waitKey = `${agent.id}:${String(extra.requestId)}`;
    const cancelled = new AbortController();
    waits.set(waitKey, cancelled);
    let outcome = 'error';
    try {
      const result = await calls.call(agent, request.params.name, request.params.arguments, {
        signal: AbortSignal.any([extra.signal, cancelled.signal]),
        sealer,
        ...(progressToken !== undefined
          ? {
              progress: (update) => extra.sendNotification({ method: 'notifications/progress', params: { progressToken, ...update } }),
            }
          : {}),
        offerUrl: ({ url, message, elicitationId }) => {
          // Not awaited: the client answers on a new HTTP request, which a stateless server cannot
          // route back here. The offer is what matters; the decision arrives through twokey.
          extra.sendRequest({ method: 'elicitation/create', params: { mode: 'url', url, message, elicitationId } }, ElicitResultSchema).catch(() => undefined);
        },
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
        log.warn({ tool: request.params.name }, 'mcp tools/call: database unavailable');
        return toolError(
          'twokey cannot reach its database right now. Call this tool again with the same arguments in a minute: it finds the same request, never a new one.',
        );
      }
      log.error({ err: error, tool: request.params.name }, 'mcp tools/call failed');
      return toolError('twokey could not handle this call (internal error); nothing new was requested. Try again later.');
    } finally {
      if (waits.get(waitKey) === cancelled) waits.delete(waitKey);
      // A name the agent cannot see is not a label: clients choose it.
      deps.countToolCall?.(outcome === 'unknown_tool' ? '(unknown)' : request.params.name, outcome);
    }
  });
  return server;
}
