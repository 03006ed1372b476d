import { resolve, sep } from 'node:path';
import { defaultKeyFile } from '../config/audit-key.js';
import { defaultCheckpointDir } from '../audit/sinks.js';
import type { Env } from '../config/env.js';
import { ConfigError } from '../config/errors.js';
import { isTwokeyError } from '../core/errors.js';
import { DataDirLockedError } from '../db/data-dir-lock.js';
import { scrubSecrets } from '../lib/secrets.js';
import { systemErrorText } from '../lib/system-errors.js';

/**
 * Every way a command can fail, said in one line an operator can act on (`twokey: …`), never a
 * stack trace: the busy port, the unreachable database, the data directory that cannot be written.
 * Exit 2 means "fix the configuration", 1 anything else.
 */
export interface Failure {
  message: string;
  exitCode: 1 | 2;
  /** Not one of the causes named here: the stack is worth printing when LOG_LEVEL asks for detail. */
  unexpected?: boolean;
}

/** A Node system error: `code` (EADDRINUSE…) and, depending on the call, the address, port, path or host name. */
interface SystemError {
  code: string;
  syscall?: string;
  address?: string;
  port?: number;
  path?: string;
  hostname?: string;
}

/** The error and every `cause` behind it (drizzle wraps the driver's error in its own). */
function* causes(error: unknown): Generator<unknown> {
  const seen = new Set<unknown>();
  for (let current = error; current !== undefined && current !== null && !seen.has(current); current = (current as { cause?: unknown }).cause) {
    seen.add(current);
    yield current;
  }
}

function isSystemError(value: unknown): value is SystemError & Error {
  const code = value instanceof Error ? (value as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^E[A-Z_]+$/.test(code);
}

/** postgres.js's error for what the server answered (`code` is the SQLSTATE). */
function isPostgresError(value: unknown): value is Error & { code: string } {
  return value instanceof Error && value.name === 'PostgresError';
}

function listenFailure(error: SystemError, env: Env | undefined): Failure | null {
  const host = error.address ?? env?.HOST ?? '';
  const port = error.port ?? env?.PORT;
  switch (error.code) {
    case 'EADDRINUSE':
      return { exitCode: 1, message: `port ${port} on ${host} is already in use; stop the other process or set PORT` };
    case 'EACCES':
      return { exitCode: 1, message: `no permission to listen on port ${port} on ${host} (ports below 1024 need privileges); set PORT to 1024 or above` };
    case 'EADDRNOTAVAIL':
      return { exitCode: 2, message: `HOST ${host} is not an address of this machine; set HOST to one of its addresses (127.0.0.1, or 0.0.0.0 for all)` };
    default:
      return { exitCode: 1, message: `cannot listen on ${host}:${port}: ${systemErrorText(error.code)}` };
  }
}

/** Where the database is, without the user name or password DATABASE_URL may carry. */
function databaseLocation(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    return `${url.hostname}:${url.port || '5432'}${url.pathname}`;
  } catch {
    return 'DATABASE_URL';
  }
}

/** SQLSTATE classes that mean "this server cannot be used with these settings", not a bug. */
const CONNECTION_SQLSTATES = /^(08|28|3D|53|57P0)/;

function databaseFailure(error: unknown, env: Env | undefined): Failure | null {
  if (!env?.DATABASE_URL) return null;
  const where = `the database at ${databaseLocation(env.DATABASE_URL)} (DATABASE_URL)`;
  for (const cause of causes(error)) {
    if (isPostgresError(cause) && CONNECTION_SQLSTATES.test(cause.code)) {
      // The server's own words name the role or database, never the password.
      return { exitCode: 1, message: `cannot use ${where}: ${cause.message}` };
    }
    if (isSystemError(cause) && (cause.syscall === 'connect' || cause.syscall === 'getaddrinfo' || cause.code === 'ECONNRESET' || cause.code === 'ETIMEDOUT')) {
      if (cause.syscall === 'getaddrinfo' && cause.hostname !== undefined && cause.hostname === env.HOST) return null;
      return { exitCode: 1, message: `cannot reach ${where}: ${systemErrorText(cause.code)}` };
    }
  }
  return null;
}

/** Which setting a file path belongs to, so the message says what to change. */
function settingOf(path: string, env: Env | undefined): { name: string; what: string; path: string } | null {
  if (!env) return null;
  const full = resolve(path);
  const within = (dir: string) => full === resolve(dir) || full.startsWith(resolve(dir) + sep);
  const keyFile = env.TWOKEY_AUDIT_KEY_FILE ?? defaultKeyFile(env.TWOKEY_DATA_DIR);
  const checkpoints = env.TWOKEY_AUDIT_CHECKPOINTS ?? defaultCheckpointDir(env.TWOKEY_DATA_DIR);
  if (within(keyFile)) return { name: 'TWOKEY_AUDIT_KEY_FILE', what: 'the audit key file', path: resolve(keyFile) };
  if (within(checkpoints)) return { name: 'TWOKEY_AUDIT_CHECKPOINTS', what: 'the audit checkpoint directory', path: resolve(checkpoints) };
  if (within(env.TWOKEY_DATA_DIR)) return { name: 'TWOKEY_DATA_DIR', what: 'the data directory', path: resolve(env.TWOKEY_DATA_DIR) };
  return null;
}

function fileFailure(error: SystemError & { path: string }, env: Env | undefined): Failure {
  const setting = settingOf(error.path, env);
  const reason = systemErrorText(error.code);
  if (!setting) return { exitCode: 1, message: `cannot use ${error.path}: ${reason}` };
  // A file inside the setting's directory is named too: "permission denied (open …/pglite/PG_VERSION)".
  const inside = resolve(error.path) === setting.path ? '' : ` (${error.syscall ?? 'at'} ${resolve(error.path)})`;
  return { exitCode: 1, message: `cannot use ${setting.what} ${setting.path} (${setting.name}): ${reason}${inside}` };
}

/** DATABASE_URL's password, or any other URL's, never reaches the terminal. */
const URL_CREDENTIALS = /(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:)[^@\s/]*@/gi;

function firstLine(text: string): string {
  return scrubSecrets(text.split('\n')[0] ?? '').replace(URL_CREDENTIALS, '$1[REDACTED]@');
}

/** The one line (and exit code) for whatever stopped a command; `env` is the environment when it was read. */
export function explainFailure(error: unknown, env: Env | undefined): Failure {
  if (error instanceof ConfigError || error instanceof DataDirLockedError) return { exitCode: 2, message: error.message };
  if (isTwokeyError(error)) {
    const details = error.details ? `\n${error.details.map((d) => `  ${d.path}: ${d.message}`).join('\n')}` : '';
    return { exitCode: 1, message: `${error.message}${details}` };
  }
  if (isSystemError(error) && error.syscall === 'listen') return listenFailure(error, env) ?? { exitCode: 1, message: firstLine(error.message) };
  const database = databaseFailure(error, env);
  if (database) return database;
  if (isSystemError(error) && error.syscall === 'getaddrinfo' && error.hostname !== undefined && error.hostname === env?.HOST) {
    return { exitCode: 2, message: `HOST ${error.hostname} does not resolve to an address of this machine; set HOST (127.0.0.1, or 0.0.0.0 for all)` };
  }
  if (isSystemError(error) && typeof error.path === 'string') return fileFailure({ code: error.code, syscall: error.syscall, path: error.path }, env);
  const message = error instanceof Error ? error.message : String(error);
  return { exitCode: 1, message: `${firstLine(message)} (set LOG_LEVEL=debug to see where it failed)`, unexpected: true };
}
