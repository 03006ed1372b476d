import type { FastifyInstance } from 'fastify';
import type { McpStore } from './ports.js';
import type * as McpServerModule from './mcp-server.js';
import type * as DirectCallModule from './direct-call.js';
import { agentOf, authenticateAgent, bearerKey, perAgentRateLimit } from '../http-kit/agent-auth.js';
import { tokenSealer } from '../idempotency/seal.js';
import type { FailedAuthLimiter } from '../limits/index.js';
import { createMcpCalls, type McpCallDeps, type McpCalls } from './calls.js';
import type { McpServices } from './ports.js';

export interface McpRouteDeps extends Omit<McpCallDeps, 'store'>, Pick<McpServices, 'agents' | 'operations'> {
  store: McpStore;
  rateLimit: { max: number; timeWindowMs: number };
  /** Counts each answered tools/call (`twokey_mcp_tool_calls_total`). */
  countToolCall?(tool: string, outcome: string): void;
  /** The same count of refused keys as /v1 and /agp: a key guessed here is a key guessed. */
  failedAuth: FailedAuthLimiter;
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

/**
 * Whether this is one tools/call (not a batch) of a tool no human decides, without a progress token:
 * the call the direct path answers (./direct-call.ts checks the rest: headers, the request's shape).
 */
function mayAnswerDirectly(body: unknown, operation: McpRouteDeps['operation']): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const { method, params } = body as { method?: unknown; params?: { name?: unknown } };
  return method === 'tools/call' && !needsStream(body, operation) && typeof params?.name === 'string';
}

/**
 * Whether the answer to these messages may need a stream: a tools/call with a progress token (its
 * notifications) or of a tool a human decides (the wait may offer the approval page through URL
 * elicitation). Everything else (initialize, tools/list, a tool no human decides) is answered with
 * one JSON body, which spares the client and the server an SSE stream per call.
 */
function needsStream(body: unknown, operation: McpRouteDeps['operation']): boolean {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  return messages.some((message) => {
    if (typeof message !== 'object' || message === null) return false;
    const { method, params } = message as { method?: unknown; params?: { name?: unknown; _meta?: { progressToken?: unknown } } };
    if (method !== 'tools/call') return false;
    if (params?._meta?.progressToken !== undefined) return true;
    const tool = typeof params?.name === 'string' ? operation(params.name) : undefined;
    return !tool?.autoApprove;
  });
}

/**
 * `POST /mcp`: the MCP server over Streamable HTTP, stateless. The agent's API key is
 * checked by the same hook as /v1 and /agp before any MCP handling (401 plain JSON).
 */
export function registerMcpRoutes(app: FastifyInstance, deps: McpRouteDeps): McpCalls {
  const calls = createMcpCalls(deps);
  /**
   * Calls waiting in this process, by agent and JSON-RPC id. Stateless: a client's
   * `notifications/cancelled` arrives on a new POST, so it is routed to the wait here.
   */
  const waits = new Map<string, AbortController>();
  let mcpServer: Promise<typeof McpServerModule> | undefined;
  let directCalls: Promise<typeof DirectCallModule> | undefined;
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
      if (mayAnswerDirectly(request.body, deps.operation)) {
        const { directToolCall, answerDirectly } = await (directCalls ??= import('./direct-call.js'));
        const call = directToolCall(request.headers, request.body);
        if (call) {
          const gone = new AbortController();
          // A client that goes away aborts the wait (the proposal stays), as the SDK transport's close does.
          reply.raw.on('close', () => {
            if (!reply.raw.writableFinished) gone.abort();
          });
          const body = await answerDirectly(call, { agent, gone, sealer: tokenSealer(bearerKey(request)) }, deps, calls, waits, request.log);
          // Written as the SDK transport writes its JSON answer (status, its content type, the body), past fastify's reply.
          reply.hijack();
          // Its length, not chunks: the body is whole already.
          reply.raw.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
          return;
        }
      }
      // The SDK is loaded at the first call rather than at start: a server most of whose agents use
      // /v1 should not pay for compiling it before it answers.
      const { buildServer, StreamableHTTPServerTransport } = await (mcpServer ??= import('./mcp-server.js'));
      const server = buildServer(agent, tokenSealer(bearerKey(request)), deps, calls, waits, request.log);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !needsStream(request.body, deps.operation) });
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
