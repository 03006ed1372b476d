import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { isTwokeyError } from '../core/errors.js';
import { isDatabaseUnavailable } from '../lib/driver-errors.js';
import type { AgentRecord } from '../core/model.js';
import type { McpStore } from './ports.js';
import type { TokenSealer } from '../core/request-identity.js';
import { agentOf, authenticateAgent, bearerKey, perAgentRateLimit } from '../http-kit/agent-auth.js';
import { tokenSealer } from '../idempotency/seal.js';
import type { FailedAuthLimiter } from '../limits/index.js';
import { createMcpCalls, toolError, UnknownToolError, type McpCallDeps, type McpCalls } from './calls.js';
import type { McpServices } from './ports.js';
import { toolsFor } from './tools.js';

export interface McpRouteDeps extends Omit<McpCallDeps, 'store'>, Pick<McpServices, 'agents' | 'operations'> {
  store: McpStore;
  rateLimit: { max: number; timeWindowMs: number };
  /** Counts each answered tools/call (`twokey_mcp_tool_calls_total`). */
  countToolCall?(tool: string, outcome: string): void;
  /** The same count of refused keys as /v1 and /agp: a key guessed here is a key guessed. */
  failedAuth: FailedAuthLimiter;
}

const SERVER_INFO = { name: 'twokey', version: '0.1.0' };
const INSTRUCTIONS =
  'Every tool here asks a human before it acts. A call waits for the decision and answers with its outcome. ' +
  'When the outcome is "pending", call the same tool again with the same arguments: it returns the same request, never a new one. ' +
  'When it is "denied" or "expired", the action did not happen: do not retry it or work around it.';

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

function isInitialize(body: unknown): body is { method: 'initialize'; params?: { capabilities?: { elicitation?: { url?: unknown } } } } {
  return typeof body === 'object' && body !== null && !Array.isArray(body) && (body as { method?: unknown }).method === 'initialize';
}

function cancelledRequestIds(body: unknown): string[] {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  return messages.flatMap((message) => {
    if (typeof message !== 'object' || message === null) return [];
    const { method, params } = message as { method?: unknown; params?: { requestId?: unknown } };
    const id = params?.requestId;
    return method === 'notifications/cancelled' && (typeof id === 'string' || typeof id === 'number') ? [String(id)] : [];
  });
}

/** A new low-level server per request: nothing lives between requests, so any replica answers any call. */
function buildServer(
  agent: AgentRecord,
  sealer: TokenSealer,
  deps: McpRouteDeps,
  calls: McpCalls,
  waits: Map<string, AbortController>,
  log: FastifyBaseLogger,
): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
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

/**
 * `POST /mcp`: the MCP server of CONTRACT-style Streamable HTTP, stateless. The agent's API key is
 * checked by the same hook as /v1 and /agp before the SDK sees the request (401 plain JSON).
 */
export function registerMcpRoutes(app: FastifyInstance, deps: McpRouteDeps): McpCalls {
  const calls = createMcpCalls(deps);
  /**
   * Calls waiting in this process, by agent and JSON-RPC id. Stateless: a client's
   * `notifications/cancelled` arrives on a new POST, so it is routed to the wait here.
   */
  const waits = new Map<string, AbortController>();
  app.register(async (scope) => {
    scope.addHook('onRequest', authenticateAgent(deps.agents, deps.failedAuth));
    const limited = perAgentRateLimit(deps.rateLimit);

    scope.post('/mcp', { config: limited }, async (request, reply) => {
      const agent = agentOf(request);
      if (isInitialize(request.body)) {
        // Stateless: a later tools/call on any replica learns the client's capabilities from here.
        const urlElicitation = request.body.params?.capabilities?.elicitation?.url !== undefined;
        await deps.store.rememberClient(agent.id, urlElicitation, deps.clock());
      }
      for (const requestId of cancelledRequestIds(request.body)) waits.get(`${agent.id}:${requestId}`)?.abort();
      const server = buildServer(agent, tokenSealer(bearerKey(request)), deps, calls, waits, request.log);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      await server.connect(transport);
      reply.hijack();
      // A client that goes away aborts the handler's wait (the proposal stays).
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      await transport.handleRequest(request.raw, reply.raw, request.body);
    });

    // No sessions and no server-initiated stream: nothing to GET or DELETE (the spec's 405).
    for (const method of ['GET', 'DELETE'] as const) {
      scope.route({
        method,
        url: '/mcp',
        config: limited,
        handler: async (_request, reply) =>
          reply
            .status(405)
            .header('allow', 'POST')
            .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this stateless server takes POST only.' }, id: null }),
      });
    }
  });
  return calls;
}
