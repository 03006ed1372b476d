import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { assetParams } from '../schemas.js';

function loadAsset(name: string, type: string) {
  const body = readFileSync(new URL(`../assets/${name}`, import.meta.url));
  return { body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) };
}

const ASSETS = {
  'console.css': loadAsset('console.css', 'text/css; charset=utf-8'),
  'console.js': loadAsset('console.js', 'text/javascript; charset=utf-8'),
} as const;

/** The stylesheet and script, revalidated by ETag so a new release shows at once. */
export const assetRoutes: FastifyPluginAsync = async (scope) => {
  scope.withTypeProvider<ZodTypeProvider>().get('/assets/:file', { schema: { params: assetParams } }, async (request, reply) => {
    const name = request.params.file;
    const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name as keyof typeof ASSETS] : undefined;
    if (!asset) return reply.callNotFound();
    const etag = `"${asset.version}"`;
    reply.header('cache-control', 'no-cache').header('etag', etag);
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    return reply.type(asset.type).send(asset.body);
  });
};
