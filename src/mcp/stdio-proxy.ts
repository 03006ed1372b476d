import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  ElicitRequestSchema,
  ListToolsRequestSchema,
  type ElicitRequest,
} from '@modelcontextprotocol/sdk/types.js';

export interface StdioProxyOptions {
  /** The running twokey's base URL (TWOKEY_URL); `/mcp` is added. */
  url: string;
  /** The agent's API key (TWOKEY_AGENT_KEY). */
  apiKey: string;
  /** How long one forwarded tools/call may take; twokey answers `pending` after TWOKEY_MCP_WAIT anyway. */
  callTimeoutMs?: number;
}

const DEFAULT_CALL_TIMEOUT_MS = 330_000;

export function mcpEndpoint(base: string): URL {
  const url = new URL(base);
  if (!url.pathname.endsWith('/mcp')) url.pathname = `${url.pathname.replace(/\/$/, '')}/mcp`;
  return url;
}

async function connectHttp(options: StdioProxyOptions, capabilities: Record<string, unknown>): Promise<Client> {
  // The SDK's client (and its JSON Schema validator) loads on first use, so `initialize` from the
  // desktop client is answered without waiting for it.
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]);
  const client = new Client({ name: 'twokey-mcp-stdio', version: '0.1.0' }, { capabilities });
  await client.connect(
    new StreamableHTTPClientTransport(mcpEndpoint(options.url), { requestInit: { headers: { authorization: `Bearer ${options.apiKey}` } } }),
  );
  return client;
}

/** Checks the URL and the key before serving, so a desktop client's log says what is wrong. */
export async function checkTwokey(options: StdioProxyOptions): Promise<void> {
  const client = await connectHttp(options, {});
  await client.close();
}

/**
 * `twokey mcp`: the gated tools over stdio for clients configured with a command. A stdio server whose
 * handlers forward to the running twokey's `/mcp` with the SDK's client: tools, progress, cancellation
 * and URL elicitation pass through; no approval logic lives here.
 */
export async function serveStdioProxy(options: StdioProxyOptions): Promise<{ close(): Promise<void> }> {
  const server = new Server({ name: 'twokey', version: '0.1.0' }, { capabilities: { tools: { listChanged: false } } });
  let upstream: Promise<Client> | null = null;
  // Connected once the desktop client has said what it supports, so twokey sees the same capabilities.
  const http = () =>
    (upstream ??= (async () => {
      const elicitation = server.getClientCapabilities()?.elicitation;
      const client = await connectHttp(options, elicitation?.url ? { elicitation: { url: {} } } : {});
      if (elicitation?.url) {
        client.setRequestHandler(ElicitRequestSchema, (request: ElicitRequest) => server.elicitInput(request.params));
      }
      client.onclose = () => {
        upstream = null;
      };
      return client;
    })().catch((error: unknown) => {
      upstream = null;
      throw error;
    }));

  server.setRequestHandler(ListToolsRequestSchema, async (request) => (await http()).listTools(request.params));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const progressToken = request.params._meta?.progressToken;
    const client = await http();
    return client.request({ method: 'tools/call', params: request.params }, CallToolResultSchema, {
      signal: extra.signal,
      timeout: options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      ...(progressToken !== undefined
        ? {
            onprogress: (progress) => {
              void extra.sendNotification({ method: 'notifications/progress', params: { progressToken, ...progress } }).catch(() => undefined);
            },
          }
        : {}),
    });
  });

  await server.connect(new StdioServerTransport());
  return {
    async close() {
      const client = upstream;
      upstream = null;
      await client?.then((c) => c.close()).catch(() => undefined);
      await server.close();
    },
  };
}
