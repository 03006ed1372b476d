import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ElicitResultSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { FastifyBaseLogger } from 'fastify';
import type { AgentRecord } from '../core/model.js';
import type { TokenSealer } from '../core/request-identity.js';
import type { McpCalls } from './calls.js';
import type { McpServices } from './ports.js';
import { answerToolCall, type ToolCallDeps } from './tool-call.js';
import { toolsFor } from './tools.js';

// The MCP SDK's server for one `POST /mcp` request. Apart from the route, which imports it at the
// first call: the SDK is not loaded by a server that is never asked over MCP.

/** What the server takes from the route's dependencies: the tools' operations and the call counter. */
export interface McpServerDeps extends Pick<McpServices, 'operations'>, ToolCallDeps {}

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
    return answerToolCall(
      {
        agent,
        requestId: extra.requestId,
        name: request.params.name,
        args: request.params.arguments,
        gone: extra.signal,
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
      },
      deps,
      calls,
      waits,
      log,
    );
  });
  return server;
}
