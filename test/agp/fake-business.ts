import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';

/**
 * Joe's Pizza on 127.0.0.1: a business that speaks AGP over HTTP (POST /agp/discover, /query,
 * /execute), demands its API key, and applies each Idempotency-Key's order once.
 */

export const JOES_PIZZA_TOKEN = 'pizza-live-key-3f9a1c7e5b2d4a6c';

export const menu = [
  { id: 'pepperoni', name: 'Pepperoni Pizza', price: 14.99, currency: 'USD' },
  { id: 'margherita', name: 'Margherita', price: 12.99, currency: 'USD' },
];

export interface ReceivedCall {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

export async function startFakePizzeria() {
  const calls: ReceivedCall[] = [];
  const orders = new Map<string, Record<string, unknown>>();
  const held: Array<() => void> = [];
  let holdExecutes = false;
  let failExecutes = false;
  /** The order is placed, then the answer is lost: a 5xx, or none at all (twokey times out). */
  let afterActing: { kind: 'status'; status: number } | { kind: 'hang' } | null = null;
  let onExecute: (() => void) | null = null;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const call: ReceivedCall = { path: req.url ?? '', headers: req.headers, body: raw ? (JSON.parse(raw) as Record<string, unknown>) : {} };
      calls.push(call);
      const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.headers.authorization !== `Bearer ${JOES_PIZZA_TOKEN}`) return send(401, { error: 'bad credentials' });
      switch (call.path) {
        case '/agp/discover':
          return send(200, {
            business: { name: "Joe's Pizza" },
            services: [{ id: 'menu' }, { id: 'order', requiresConfirmation: true }],
            hours: '11:00-23:00',
            delivery: { fee: 3.99 },
          });
        case '/agp/query':
          return send(200, { results: (call.body.request as { serviceId?: string }).serviceId === 'menu' ? menu : [] });
        case '/agp/execute':
          return execute(call, res, send);
        default:
          return send(404, { error: 'no such path' });
      }
    });
  });

  function execute(call: ReceivedCall, _res: ServerResponse, send: (status: number, body: unknown) => void) {
    onExecute?.();
    const answer = () => {
      if (failExecutes) return send(500, { error: `database down; key ${JOES_PIZZA_TOKEN}` });
      const request = call.body.request as { action?: string; items?: Array<{ productId: string; quantity: number }> };
      if (request.action === 'close') return send(409, { message: 'Restaurant is closed' });
      const key = String(call.headers['idempotency-key']);
      const existing = orders.get(key);
      if (existing) return send(200, existing);
      const total = (request.items ?? []).reduce((sum, item) => sum + (menu.find((m) => m.id === item.productId)?.price ?? 0) * item.quantity, 0);
      const order = { status: 'completed', orderId: `joes-${orders.size + 1}`, receipt: { total: Math.round(total * 100) / 100 } };
      orders.set(key, order);
      if (afterActing?.kind === 'status') return send(afterActing.status, { error: 'gateway hiccup after the order was placed' });
      if (afterActing?.kind === 'hang') return undefined;
      return send(200, order);
    };
    if (holdExecutes) held.push(answer);
    else answer();
  }

  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');

  return {
    url: `http://127.0.0.1:${address.port}/agp`,
    calls,
    orders,
    executes: () => calls.filter((call) => call.path === '/agp/execute'),
    /** Keeps execute answers until `release()`; resolves `started` when one arrives. */
    hold() {
      holdExecutes = true;
      return new Promise<void>((resolve) => (onExecute = resolve));
    },
    release() {
      holdExecutes = false;
      onExecute = null;
      for (const answer of held.splice(0)) answer();
    },
    failExecutes(fail: boolean) {
      failExecutes = fail;
    },
    /** Places each order, then answers `status` (a 502) or, with 'hang', never answers. */
    actThenLoseAnswer(mode: number | 'hang' | null) {
      afterActing = mode === null ? null : mode === 'hang' ? { kind: 'hang' } : { kind: 'status', status: mode };
    },
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

export type FakePizzeria = Awaited<ReturnType<typeof startFakePizzeria>>;
