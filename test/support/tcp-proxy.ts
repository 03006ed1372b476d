import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { openDatabase } from '../../src/db/database.js';
import { openTestDatabase, type Driver } from './database.js';

/** A TCP proxy in front of PostgreSQL that a test can cut and restore, like a network outage. */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1') {
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;
  /** Bytes in either direction wait here while the link is held (a partition: nothing is closed). */
  let held: Array<() => void> | null = null;
  /** What clients sent, in order: a test reads which messages of the wire protocol went out. */
  const fromClients: Buffer[] = [];
  /**
   * The next client bytes holding this text are not passed on; `then` says what happens to their
   * connection: `close` drops it, `cut` drops every connection and refuses new ones, `keep` leaves it
   * open (the database never sees those bytes; the test acts on the session itself).
   */
  let tripwire: { marker: string; then: 'close' | 'cut' | 'keep'; tripped: () => void } | null = null;

  function forward(from: Socket, to: Socket, fromClient = false) {
    from.on('data', (chunk: Buffer) => {
      if (fromClient && tripwire && chunk.includes(tripwire.marker)) {
        const { then, tripped } = tripwire;
        tripwire = null;
        if (then === 'cut') void cut();
        if (then === 'close') for (const socket of [from, to]) socket.destroy();
        tripped();
        return;
      }
      if (fromClient) fromClients.push(chunk);
      if (held) held.push(() => to.write(chunk));
      else to.write(chunk);
    });
    from.on('end', () => to.end());
  }

  async function listen() {
    server = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      forward(client, upstream, true);
      forward(upstream, client);
    });
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address && typeof address !== 'string') port = address.port;
  }

  async function cut() {
    const closing = server;
    server = null;
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((done) => (closing ? closing.close(() => done()) : done()));
  }

  await listen();
  return {
    get port() {
      return port;
    },
    /** Everything clients have sent through the proxy so far. */
    sentByClients(): Buffer {
      return Buffer.concat(fromClients);
    },
    /** Drops every connection and refuses new ones. */
    cut,
    /**
     * Stops the next client bytes that hold `marker` (a statement's text, say) before the database
     * sees them, and does `then` to their connection (see `tripwire`). Resolves once that happened.
     */
    stopWhenClientSends(marker: string, then: 'close' | 'cut' | 'keep'): Promise<void> {
      return new Promise((tripped) => (tripwire = { marker, then, tripped }));
    },
    restore: listen,
    /** Stops passing bytes on, in both directions, without closing anything: the database does not answer. */
    hold() {
      held ??= [];
    },
    /** Passes on what was held, in order, and everything after it. */
    release() {
      const waiting = held ?? [];
      held = null;
      for (const send of waiting) send();
    },
    close: cut,
  };
}

/**
 * A fresh test database on PostgreSQL, `base` reached directly (to look at what landed), and
 * `database`, the same one through a proxy the test can cut or hold (for twokey); `close` closes all three.
 */
export async function openBehindProxy(driver: Driver) {
  const base = await openTestDatabase(driver);
  const target = new URL(base.url ?? '');
  const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
  target.port = String(proxy.port);
  const database = await openDatabase({ databaseUrl: target.toString(), dataDir: '', poolSize: 4 });
  return {
    base,
    proxy,
    database,
    async close() {
      await database.close();
      await proxy.close();
      await base.close();
    },
  };
}
