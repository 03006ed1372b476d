import type { FastifyPluginAsync } from 'fastify';
import type { ConsoleContext } from '../context.js';
import { SECURITY_HEADERS } from '../security.js';

const SSE_HEARTBEAT_MS = 25_000;

/** Live updates (server-sent events): console.js refreshes what changed. */
export const eventRoutes: FastifyPluginAsync<ConsoleContext> = async (scope, { services, auth, guard, cookieName, streams }) => {
  scope.get('/events', { preHandler: guard.fetch }, async (request, reply) => {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // A buffering proxy would hold events back until its buffer fills.
      'x-accel-buffering': 'no',
    });
    raw.write('retry: 3000\n\n');
    // Only ids and statuses travel: the page fetches what it shows, with the session's rights.
    const unsubscribe = services.changes.onEvery((proposal) => {
      raw.write(`event: proposal\ndata: ${JSON.stringify({ id: proposal.id, status: proposal.status })}\n\n`);
    });
    const heartbeat = setInterval(() => {
      // A revoked or expired session stops receiving, even on a connection opened before.
      void auth.authenticate(request.cookies[cookieName]).then(
        (live) => (live ? raw.write(': keep-alive\n\n') : end()),
        () => end(),
      );
    }, SSE_HEARTBEAT_MS);
    heartbeat.unref();
    const end = () => {
      if (!streams.delete(end)) return;
      clearInterval(heartbeat);
      unsubscribe();
      raw.end();
    };
    streams.add(end);
    request.raw.once('close', end);
  });
};
