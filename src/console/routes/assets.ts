import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { assetParams } from '../schemas.js';

function loadAsset(name: string, type: string, path: string | URL = new URL(`../assets/${name}`, import.meta.url)) {
  const body = readFileSync(path);
  return { body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) };
}

const ASSETS = {
  'console.css': loadAsset('console.css', 'text/css; charset=utf-8'),
  'console.js': loadAsset('console.js', 'text/javascript; charset=utf-8'),
  'passkeys.js': loadAsset('passkeys.js', 'text/javascript; charset=utf-8'),
  // @simplewebauthn/browser's own bundle (the global SimpleWebAuthnBrowser), served from 'self' like the rest.
  'webauthn.js': loadAsset('webauthn.js', 'text/javascript; charset=utf-8', simpleWebAuthnBundle()),
} as const;

/** The package exports only its modules; its UMD bundle sits beside them in the same package. */
function simpleWebAuthnBundle(): string {
  const entry = createRequire(import.meta.url).resolve('@simplewebauthn/browser');
  return join(dirname(dirname(entry)), 'dist', 'bundle', 'index.umd.min.js');
}

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
