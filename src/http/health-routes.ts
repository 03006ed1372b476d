import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

export interface HealthRouteDeps {
  /** Resolves when the database answers. */
  ping(): Promise<void>;
  metrics: Registry;
}

const READINESS_TIMEOUT_MS = 2_000;

export function registerHealthRoutes(app: FastifyInstance, deps: HealthRouteDeps): void {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    try {
      await Promise.race([
        deps.ping(),
        new Promise((_, reject) => setTimeout(() => reject(new Error('database ping timed out')), READINESS_TIMEOUT_MS).unref()),
      ]);
      return { status: 'ready' };
    } catch {
      return reply.status(503).send({ status: 'not_ready', reason: 'database unreachable' });
    }
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type(deps.metrics.contentType).send(await deps.metrics.metrics());
  });
}
