import type { FastifyInstance } from 'fastify';

/**
 * The minimal servers' side of bench/support/listening-script.ts: listens on a free port of
 * 127.0.0.1, says which on stdout, and closes `app` then `close` on SIGTERM. Kept apart from the
 * harness that starts them, so a minimal server loads fastify and its driver only, none of the
 * harness's fakes or twokey.
 */
export async function listenAndAnnounce(app: FastifyInstance, close: () => Promise<unknown>): Promise<void> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  console.log(`listening ${typeof address === 'object' && address ? address.port : ''}`);
  process.once('SIGTERM', () => {
    void app
      .close()
      .then(close)
      .finally(() => process.exit(0));
  });
}
