import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

/** One Web API call as Slack would have received it. */
export interface SlackCall {
  method: string;
  args: Record<string, any>;
  authorization: string | undefined;
  /** Every request header, lower-case, as Node's http server reads them. */
  headers: IncomingMessage['headers'];
  /** Date.now() on arrival */
  at: number;
}

export interface FakeAnswer {
  status?: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/** Returns an answer to override the default, or undefined to fall through to it. */
export type Responder = (call: SlackCall) => FakeAnswer | undefined;

/** Form fields the Web API client JSON-encodes (everything else arrives as plain strings). */
const JSON_FIELDS = new Set(['blocks', 'view', 'attachments', 'metadata']);

/**
 * A local stand-in for the Slack Web API (and the Socket Mode websocket): records every call and
 * answers like Slack does — HTTP 200 with `{ok:false, error}` for API errors, 429 with Retry-After
 * for rate limits.
 */
export class FakeSlack {
  readonly calls: SlackCall[] = [];
  /** usergroup id → member user ids, for usergroups.users.list */
  readonly usergroups = new Map<string, string[]>();
  readonly sockets: WebSocket[] = [];
  /** Messages the Socket Mode client sent (acks), parsed. */
  readonly socketMessages: Array<Record<string, any>> = [];
  private responders: Responder[] = [];
  private nextTs = 1_700_000_000_000_100;
  private server: Server;
  private wss: WebSocketServer;
  url = '';
  port = 0;

  constructor() {
    this.server = createServer((request, response) => void this.handle(request, response));
    this.wss = new WebSocketServer({ server: this.server, path: '/socket' });
    this.wss.on('connection', (socket) => {
      this.sockets.push(socket);
      socket.on('message', (data) => {
        const parsed: unknown = JSON.parse(data.toString());
        if (typeof parsed === 'object' && parsed !== null) this.socketMessages.push(parsed as Record<string, any>);
      });
      // What Slack sends first on every connection; the client's start() waits for it.
      socket.send(JSON.stringify({ type: 'hello', num_connections: 1, debug_info: { host: 'fake' } }));
    });
  }

  async start(): Promise<this> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}/api/`;
    return this;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.terminate();
    this.wss.close();
    this.server.closeAllConnections();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  /** Adds an override; the newest one that answers wins. Returns a function removing it. */
  respond(responder: Responder): () => void {
    this.responders.unshift(responder);
    return () => {
      this.responders = this.responders.filter((r) => r !== responder);
    };
  }

  callsTo(method: string): SlackCall[] {
    return this.calls.filter((call) => call.method === method);
  }

  private defaultAnswer(call: SlackCall): FakeAnswer {
    const ts = () => {
      this.nextTs += 100;
      const text = String(this.nextTs);
      return `${text.slice(0, 10)}.${text.slice(10)}`;
    };
    switch (call.method) {
      case 'chat.postMessage':
        return { body: { ok: true, channel: call.args.channel, ts: ts(), message: { text: call.args.text } } };
      case 'chat.update':
        return { body: { ok: true, channel: call.args.channel, ts: call.args.ts } };
      case 'chat.postEphemeral':
        return { body: { ok: true, message_ts: ts() } };
      case 'views.open':
        return { body: { ok: true, view: { id: 'V0REJECT' } } };
      case 'usergroups.users.list': {
        const users = this.usergroups.get(String(call.args.usergroup));
        return { body: users ? { ok: true, users } : { ok: false, error: 'no_such_subteam' } };
      }
      case 'auth.test':
        return { body: { ok: true, user_id: 'U0TWOKEY', bot_id: 'B0TWOKEY', team_id: 'T0TEAM' } };
      case 'apps.connections.open':
        return { body: { ok: true, url: `ws://127.0.0.1:${this.port}/socket` } };
      default:
        return { body: { ok: false, error: 'unknown_method' } };
    }
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const method = (request.url ?? '').replace(/^\/api\//, '').split('?')[0] ?? '';
    const args: Record<string, any> = {};
    for (const [key, value] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) {
      args[key] = JSON_FIELDS.has(key) ? JSON.parse(value) : value;
    }
    const call: SlackCall = { method, args, authorization: request.headers.authorization, headers: request.headers, at: Date.now() };
    this.calls.push(call);
    let answer: FakeAnswer | undefined;
    for (const responder of this.responders) {
      answer = responder(call);
      if (answer) break;
    }
    answer ??= this.defaultAnswer(call);
    response.writeHead(answer.status ?? 200, { 'content-type': 'application/json', ...answer.headers });
    response.end(JSON.stringify(answer.body ?? {}));
  }
}

export async function startFakeSlack(): Promise<FakeSlack> {
  return new FakeSlack().start();
}
