import { request as httpRequest } from 'node:http';
import { join, resolve } from 'node:path';
import { TwokeyError, type ErrorCode } from '../core/errors.js';

/**
 * The CLI's side of the admin socket: node:http and nothing of the server, so a command against a
 * running server starts as fast as Node does.
 */

export const adminSocketPath = (dataDir: string): string => join(resolve(dataDir), 'admin.sock');

/** Runs an admin operation in the server that holds the data directory; its error comes back as a TwokeyError. */
export function callAdminSocket(dataDir: string, operation: string, args: unknown): Promise<unknown> {
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
