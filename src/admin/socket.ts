import { chmod, rm } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { join, resolve } from 'node:path';
import { TwokeyError, isTwokeyError, type ErrorCode } from '../core/errors.js';
import type { Services } from '../runtime/services.js';
import { runAdminOperation } from './operations.js';

/**
 * A running server holds the embedded database, so the CLI cannot open it; it asks the server over
 * this unix socket instead. The socket is readable only by the user running twokey (mode 0600):
 * file permissions are its authentication, as with the PostgreSQL socket.
 */
export const adminSocketPath = (dataDir: string): string => join(resolve(dataDir), 'admin.sock');

const MAX_REQUEST_BYTES = 64 * 1024;

export interface AdminSocketOptions {
  /** The server's own public URL: a sign-in link it mints points there, whatever port the CLI's environment names. */
  publicBaseUrl?: () => string;
}

export async function startAdminSocket(services: Services, dataDir: string, options: AdminSocketOptions = {}): Promise<Server> {
  const path = adminSocketPath(dataDir);
  // A socket file left by a crashed server would make listen fail; the data directory lock proves it is stale.
  await rm(path, { force: true });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) req.destroy();
      else chunks.push(chunk);
    });
    req.on('end', () => {
      void (async () => {
        try {
          const { operation, args } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { operation: string; args: Record<string, unknown> };
          const own = operation === 'approvers.link' && options.publicBaseUrl ? { baseUrl: options.publicBaseUrl() } : {};
          const result = await runAdminOperation(services, operation, { ...(args ?? {}), ...own });
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ result }));
        } catch (error) {
          const known = isTwokeyError(error) ? error : new TwokeyError('internal', 'admin operation failed');
          res.writeHead(known.status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: known.code, message: known.message } }));
        }
      })();
    });
  });
  await new Promise<void>((done, fail) => server.once('error', fail).listen(path, done));
  await chmod(path, 0o600);
  return server;
}

/** The CLI's side: runs an admin operation in the server that holds the data directory. */
export function callAdminSocket(dataDir: string, operation: string, args: Record<string, unknown>): Promise<unknown> {
  const body = JSON.stringify({ operation, args });
  return new Promise((done, fail) => {
    const req = httpRequest({ socketPath: adminSocketPath(dataDir), path: '/rpc', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        try {
          const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { result?: unknown; error?: { code: ErrorCode; message: string } };
          if (answer.error) fail(new TwokeyError(answer.error.code, answer.error.message));
          else done(answer.result);
        } catch (error) {
          fail(error instanceof Error ? error : new Error(String(error)));
        }
      });
    });
    req.on('error', (error) => fail(new Error(`the data directory is locked by a twokey server, but its admin socket does not answer (${error.message})`)));
    req.end(body);
  });
}
