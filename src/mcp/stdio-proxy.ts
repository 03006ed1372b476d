import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { ElicitRequest, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

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

const SERVER_INFO = { name: 'twokey', version: '0.1.0' };
const CAPABILITIES = { tools: { listChanged: false } };

/** The protocol versions the MCP SDK's server accepts, newest first (a test holds the two lists equal). */
export const STDIO_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];

type InitializeRequest = { jsonrpc: '2.0'; id: string | number; method: 'initialize'; params: { protocolVersion: string } };

function isInitialize(message: unknown): message is InitializeRequest {
  if (typeof message !== 'object' || message === null) return false;
  const { method, id, params } = message as Record<string, unknown>;
  return (
    method === 'initialize' &&
    (typeof id === 'string' || typeof id === 'number') &&
    typeof params === 'object' &&
    params !== null &&
    typeof (params as Record<string, unknown>)['protocolVersion'] === 'string'
  );
}

/** What the SDK's server answers to `initialize`, with the capabilities this proxy declares. */
export function initializeResult(requested: string) {
  return {
    protocolVersion: STDIO_PROTOCOL_VERSIONS.includes(requested) ? requested : STDIO_PROTOCOL_VERSIONS[0],
    capabilities: CAPABILITIES,
    serverInfo: SERVER_INFO,
  };
}

function writeLine(message: unknown): Promise<void> {
  return new Promise((done) => (process.stdout.write(`${JSON.stringify(message)}\n`) ? done() : process.stdout.once('drain', () => done())));
}

/**
 * `twokey mcp`: the gated tools over stdio for clients configured with a command. A stdio server whose
 * handlers forward to the running twokey's `/mcp` with the SDK's client: tools, progress, cancellation
 * and URL elicitation pass through; no approval logic lives here.
 *
 * Loading the MCP SDK (its message schemas above all) is most of this process's start, and a desktop
 * client waits for the answer to `initialize` before anything else. So that answer is written here,
 * at once, from the same fields the SDK's server would use; the SDK loads after it, receives the same
 * `initialize` (so it knows the client's capabilities, and its own answer is dropped) and every
 * message that arrived meanwhile, in order.
 */
export async function serveStdioProxy(
  options: StdioProxyOptions,
): Promise<{ close(): Promise<void>; /** The first message arrived, or stdin ended. */ started: Promise<void> }> {
  const queued: JSONRPCMessage[] = [];
  let deliver: ((message: JSONRPCMessage) => void) | null = null;
  let answeredInitialize: string | number | undefined;
  let sdk: Promise<{ close(): Promise<void> }> | null = null;
  let markStarted = () => {};
  const started = new Promise<void>((done) => (markStarted = done));

  const transport: Transport = {
    async start() {},
    async send(message) {
      // The SDK's own answer to the `initialize` already answered above.
      if (answeredInitialize !== undefined && 'id' in message && message.id === answeredInitialize && !('method' in message)) {
        answeredInitialize = undefined;
        return;
      }
      await writeLine(message);
    },
    async close() {
      process.stdin.off('data', onData);
      transport.onclose?.();
    },
  };

  const receive = (line: string) => {
    let message: JSONRPCMessage;
    try {
      message = JSON.parse(line) as JSONRPCMessage;
    } catch (error) {
      transport.onerror?.(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (sdk === null && isInitialize(message)) {
      answeredInitialize = message.id;
      void writeLine({ jsonrpc: '2.0', id: message.id, result: initializeResult(message.params.protocolVersion) });
    }
    if (deliver) deliver(message);
    else queued.push(message);
    markStarted();
    sdk ??= connectSdk(options, transport).then((server) => {
      deliver = (next) => transport.onmessage?.(next);
      for (const next of queued.splice(0)) deliver(next);
      return server;
    });
  };

  let buffered = '';
  function onData(chunk: Buffer | string) {
    buffered += chunk.toString();
    for (let end = buffered.indexOf('\n'); end !== -1; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end).replace(/\r$/, '');
      buffered = buffered.slice(end + 1);
      if (line.trim() !== '') receive(line);
    }
  }
  process.stdin.on('data', onData);
  process.stdin.once('end', markStarted);
  return {
    started,
    async close() {
      if (sdk) await (await sdk).close();
      else await transport.close();
    },
  };
}

/** The SDK's stdio server over `transport`, its handlers forwarding to twokey's `/mcp`. */
async function connectSdk(options: StdioProxyOptions, transport: Transport): Promise<{ close(): Promise<void> }> {
  const [{ Server }, { CallToolRequestSchema, CallToolResultSchema, ElicitRequestSchema, ListToolsRequestSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  const server = new Server(SERVER_INFO, { capabilities: CAPABILITIES });
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

  await server.connect(transport);
  return {
    async close() {
      const client = upstream;
      upstream = null;
      await client?.then((c) => c.close()).catch(() => undefined);
      await server.close();
    },
  };
}
