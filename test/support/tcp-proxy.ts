import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';

/** A TCP proxy in front of PostgreSQL that a test can cut and restore, like a network outage. */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1') {
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;

  async function listen() {
    server = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address && typeof address !== 'string') port = address.port;
  }

  await listen();
  return {
    get port() {
      return port;
    },
    /** Drops every connection and refuses new ones. */
    async cut() {
      const closing = server;
      server = null;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((done) => (closing ? closing.close(() => done()) : done()));
    },
    restore: listen,
    close() {
      return this.cut();
    },
  };
}
