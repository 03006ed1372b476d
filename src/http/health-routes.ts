import type { FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { withDeadline } from '../lib/timeouts.js';
import { healthSchema, notReadySchema, readySchema } from './schemas.js';

export interface HealthRouteDeps {
  /** Resolves once the database has committed a write (readiness is the ability to write). */
  ping(): Promise<void>;
  /** Why writes are refused right now, known without asking the database (a disk short of space), or null. */
  storageProblem?(): string | null;
  metrics: Registry;
}

const READINESS_TIMEOUT_MS = 2_000;

export function registerHealthRoutes(app: FastifyInstance, deps: HealthRouteDeps): void {
  app.register(async (scope) => {
    scope.setValidatorCompiler(validatorCompiler);
    scope.setSerializerCompiler(serializerCompiler);
    const health = scope.withTypeProvider<ZodTypeProvider>();

    health.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness: the process answers', response: { 200: healthSchema } } }, async () => ({
      status: 'ok' as const,
    }));

    health.get(
      '/readyz',
      {
        schema: {
          tags: ['health'],
          summary: 'Readiness: the database commits a write within 2 s',
          response: { 200: readySchema, 503: notReadySchema },
        },
      },
      async (_request, reply) => {
        const storageProblem = deps.storageProblem?.();
        if (storageProblem) return reply.status(503).send({ status: 'not_ready', reason: storageProblem });
        try {
          await withDeadline(
            READINESS_TIMEOUT_MS,
            () => deps.ping(),
            () => new Error('database ping timed out'),
            { unref: true },
          );
          return { status: 'ready' as const };
        } catch {
          return reply.status(503).send({ status: 'not_ready', reason: 'database unreachable or not taking writes' });
        }
      },
    );

    health.get(
      '/metrics',
      {
        schema: {
          tags: ['health'],
          summary: 'Prometheus metrics',
          response: { 200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: z.string() } } } },
        },
      },
      async (_request, reply) => reply.type(deps.metrics.contentType).send(await deps.metrics.metrics()),
    );
  });
}
