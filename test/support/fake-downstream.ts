import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { once } from 'node:events';

/** How the receiving end of a signed twokey request checks it (the README shows the same code). */
export function verifyTwokeySignature(secret: string, header: string | undefined, body: string, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!match?.[1] || !match[2]) return false;
  if (Math.abs(nowSeconds - Number(match[1])) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${match[1]}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(match[2], 'hex'));
}

export interface ReceivedRequest {
  path: string;
  idempotencyKey: string | undefined;
  signatureValid: boolean;
  body: Record<string, unknown>;
  headers: IncomingMessage['headers'];
}

export type Behaviour = 'ok' | 'fail' | 'hang' | 'slow';

/**
 * A downstream service on 127.0.0.1 that behaves like a careful one: it verifies the signature and
 * applies each Idempotency-Key's effect once, answering repeats with the first result.
 */
export async function startFakeDownstream(secret: string, options: { onRequest?: (request: ReceivedRequest) => void } = {}) {
  const requests: ReceivedRequest[] = [];
  const effects = new Map<string, { appliedAt: number; count: number }>();
  let behaviour: Behaviour = 'ok';
  let slowMs = 0;
  const hanging: ServerResponse[] = [];
  let onRequest: ((request: ReceivedRequest) => void) | null = null;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const key = req.headers['idempotency-key'] as string | undefined;
      const received: ReceivedRequest = {
        path: req.url ?? '',
        idempotencyKey: key,
        signatureValid: verifyTwokeySignature(secret, req.headers['x-twokey-signature'] as string | undefined, raw),
        body: raw ? (JSON.parse(raw) as Record<string, unknown>) : {},
        headers: req.headers,
      };
      requests.push(received);
      options.onRequest?.(received);
      onRequest?.(received);
      if (!received.signatureValid) return void res.writeHead(401).end();
      if (behaviour === 'fail') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"boom"}');
      if (behaviour === 'hang') return void hanging.push(res);
      const apply = () => {
        const effectKey = key ?? `no-key-${requests.length}`;
        const effect = effects.get(effectKey) ?? { appliedAt: Date.now(), count: 0 };
        effect.count += 1;
        effects.set(effectKey, effect);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ applied: true, key, repeat: effect.count > 1 }));
      };
      if (behaviour === 'slow') setTimeout(apply, slowMs);
      else apply();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');

  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    effects,
    setBehaviour(next: Behaviour, delayMs = 0) {
      behaviour = next;
      slowMs = delayMs;
    },
    /** Resolves with the next request that arrives. */
    nextRequest(): Promise<ReceivedRequest> {
      return new Promise((resolve) => {
        onRequest = (request) => {
          onRequest = null;
          resolve(request);
        };
      });
    },
    releaseHanging() {
      for (const res of hanging.splice(0)) res.destroy();
    },
    async close() {
      for (const res of hanging.splice(0)) res.destroy();
      server.closeAllConnections();
      server.close();
    },
  };
}

export type FakeDownstream = Awaited<ReturnType<typeof startFakeDownstream>>;
