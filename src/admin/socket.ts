import { chmod, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { TwokeyError, isTwokeyError } from '../core/errors.js';
import type { AdminServices } from './ports.js';
import { adminSocketPath } from './client.js';
import { runAdminOperation } from './operations.js';
import { isRecord } from '../lib/records.js';

export { adminSocketPath, callAdminSocket } from './client.js';

/**
 * A running server holds the embedded database, so the CLI cannot open it; it asks the server over
 * this unix socket instead. The socket is readable only by the user running twokey (mode 0600):
 * file permissions are its authentication, as with the PostgreSQL socket. Each request names a
 * command of the table (commands.ts) and is checked against its input schema before anything runs.
 */

const MAX_REQUEST_BYTES = 64 * 1024;

/** `{ operation, args }`, or an `invalid_request` saying what is wrong with the envelope. */
function parseRequest(body: string): { operation: string; args: unknown } {
  let request: unknown;
  try {
    request = JSON.parse(body);
  } catch {
    throw new TwokeyError('invalid_json', 'the request is not JSON');
  }
  const operation = (request as { operation?: unknown } | null)?.operation;
  if (typeof operation !== 'string') throw new TwokeyError('invalid_request', 'operation: expected the name of an admin operation');
  return { operation, args: (request as { args?: unknown }).args ?? {} };
}

export interface AdminSocketOptions {
  /** The server's own public URL: a sign-in link it mints points there, whatever port the CLI's environment names. */
  publicBaseUrl?: () => string;
}

export async function startAdminSocket(services: AdminServices, dataDir: string, options: AdminSocketOptions = {}): Promise<Server> {
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
          const { operation, args } = parseRequest(Buffer.concat(chunks).toString('utf8'));
          const own = operation === 'approvers.link' && options.publicBaseUrl && isRecord(args) ? { baseUrl: options.publicBaseUrl() } : {};
          const result = await runAdminOperation(services, operation, isRecord(args) ? { ...args, ...own } : args);
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
