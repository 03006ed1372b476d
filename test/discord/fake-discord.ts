import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export interface RecordedCall {
  method: string;
  /** Path below `/api/v10`, URL-decoded. */
  path: string;
  authorization: string | undefined;
  body: any;
}

export interface ScriptedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface StoredMessage {
  id: string;
  channelId: string;
  body: any;
  edits: number;
}

/** One client connection to the fake gateway and what it sent. */
export interface GatewayConnection {
  socket: WebSocket;
  identify: any;
  heartbeats: number;
  closed: boolean;
  sequence: number;
  /** Sends a dispatch (op 0) on this connection. */
  dispatch(event: string, data: unknown): void;
}

export interface FakeDiscord {
  apiUrl: string;
  calls: RecordedCall[];
  messages: Map<string, StoredMessage>;
  gateways: GatewayConnection[];
  /** Answers the next request matching method + path with this response instead of the normal one. */
  scriptNext(method: string, path: RegExp, response: ScriptedResponse): void;
  callsTo(method: string, path: RegExp): RecordedCall[];
  close(): Promise<void>;
}

let snowflakeCounter = 0n;
/** Discord-shaped ids (17 to 20 digits), unique within a test run. */
export function snowflake(): string {
  snowflakeCounter += 1n;
  return (1_300_000_000_000_000_000n + BigInt(Date.now() % 1_000_000) * 1_000_000n + snowflakeCounter).toString();
}

async function readBody(request: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : null;
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  // Like Discord, a 204 carries no content-type (a JSON one with an empty body breaks the client).
  response.writeHead(status, body === undefined ? headers : { 'content-type': 'application/json', ...headers });
  response.end(body === undefined ? '' : JSON.stringify(body));
}

/**
 * A local Discord: the REST API routes twokey uses (recording every call) and a gateway websocket
 * speaking just enough of the protocol for discord.js (HELLO, IDENTIFY → READY, heartbeats).
 */
export interface FakeDiscordOptions {
  applicationId: string;
  heartbeatIntervalMs?: number;
  /** Sees every REST call as it arrives (benchmarks time the moment a message is posted). */
  onCall?: (call: RecordedCall) => void;
}

export async function startFakeDiscord(options: FakeDiscordOptions): Promise<FakeDiscord> {
  const calls: RecordedCall[] = [];
  const messages = new Map<string, StoredMessage>();
  const scripted: Array<{ method: string; path: RegExp; response: ScriptedResponse }> = [];
  const gateways: GatewayConnection[] = [];
  let port = 0;

  const server = createServer((request, response) => {
    void (async () => {
      const url = new URL(request.url ?? '/', 'http://127.0.0.1');
      const path = decodeURIComponent(url.pathname.replace(/^\/api\/v10/, ''));
      const method = request.method ?? 'GET';
      const body = await readBody(request);
      const call = { method, path, authorization: request.headers.authorization, body };
      calls.push(call);
      options.onCall?.(call);

      const script = scripted.findIndex((s) => s.method === method && s.path.test(path));
      const [canned] = script >= 0 ? scripted.splice(script, 1) : [];
      if (canned) return send(response, canned.response.status, canned.response.body, canned.response.headers);
      if (method === 'GET' && path === '/gateway/bot') {
        return send(response, 200, {
          url: `ws://127.0.0.1:${port}/gateway`,
          shards: 1,
          session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 },
        });
      }
      let match = /^\/channels\/(\d+)\/messages$/.exec(path);
      if (method === 'POST' && match?.[1]) {
        // Like Discord: with enforce_nonce, a post repeating a recent nonce in the channel gets the first message back.
        const channelId = match[1];
        const repeated = body?.enforce_nonce ? [...messages.values()].find((m) => m.channelId === channelId && m.body.nonce === body.nonce) : undefined;
        if (repeated) return send(response, 200, { id: repeated.id, channel_id: repeated.channelId, ...repeated.body });
        const id = snowflake();
        messages.set(id, { id, channelId: match[1], body, edits: 0 });
        return send(response, 200, { id, channel_id: match[1], ...body });
      }
      match = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path);
      if (method === 'PATCH' && match?.[2]) {
        const stored = messages.get(match[2]);
        if (!stored) return send(response, 404, { message: 'Unknown Message', code: 10008 });
        stored.body = { ...stored.body, ...body };
        stored.edits += 1;
        return send(response, 200, { id: stored.id, channel_id: stored.channelId, ...stored.body });
      }
      if (method === 'POST' && /^\/interactions\/\d+\/[^/]+\/callback$/.test(path)) return send(response, 204, undefined);
      if (method === 'POST' && /^\/webhooks\/\d+\/[^/]+$/.test(path)) return send(response, 200, { id: snowflake(), ...body });
      return send(response, 404, { message: '404: Not Found', code: 0 });
    })().catch((error: unknown) => send(response, 500, { message: String(error) }));
  });

  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (request, socket, head) => {
    if (!request.url?.startsWith('/gateway')) return socket.destroy();
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request));
  });
  wss.on('connection', (socket: WebSocket) => {
    const connection: GatewayConnection = {
      socket,
      identify: null,
      heartbeats: 0,
      closed: false,
      sequence: 0,
      dispatch(event, data) {
        connection.sequence += 1;
        socket.send(JSON.stringify({ op: 0, t: event, s: connection.sequence, d: data }));
      },
    };
    gateways.push(connection);
    socket.on('close', () => (connection.closed = true));
    socket.on('message', (raw: Buffer) => {
      const packet = JSON.parse(raw.toString('utf8')) as { op: number; d: any };
      if (packet.op === 1) {
        connection.heartbeats += 1;
        socket.send(JSON.stringify({ op: 11, d: null, s: null, t: null }));
      } else if (packet.op === 2) {
        connection.identify = packet.d;
        connection.dispatch('READY', {
          v: 10,
          user: { id: options.applicationId, username: 'twokey', discriminator: '0', global_name: null, avatar: null, bot: true },
          guilds: [],
          session_id: `session-${gateways.length}`,
          resume_gateway_url: `ws://127.0.0.1:${port}/gateway`,
          application: { id: options.applicationId, flags: 0 },
          shard: [0, 1],
        });
      }
    });
    socket.send(JSON.stringify({ op: 10, d: { heartbeat_interval: options.heartbeatIntervalMs ?? 1_000 }, s: null, t: null }));
  });

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;

  return {
    apiUrl: `http://127.0.0.1:${port}/api`,
    calls,
    messages,
    gateways,
    scriptNext(method, path, response) {
      scripted.push({ method, path, response });
    },
    callsTo(method, path) {
      return calls.filter((c) => c.method === method && path.test(c.path));
    },
    async close() {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
