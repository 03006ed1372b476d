import { DrizzleQueryError } from 'drizzle-orm';
import postgres from './postgres-driver.js';

/** A connection to the database could not be had; `cause` says why. */
export class DatabaseConnectionError extends Error {
  override readonly name = 'DatabaseConnectionError';
  constructor(message: string, cause: unknown) {
    super(message, { cause });
  }
}

/** postgres.js's own codes for a connection that closed, was closed, or never opened (its errors.js). */
const DRIVER_CONNECTION_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'CONNECT_TIMEOUT']);

/** The socket's, which postgres.js passes on as they are. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * SQLSTATEs of a server that cannot serve, whatever the statement: class 08 (connection
 * exception), 53300 (too many connections), 57P01–57P03 (shutting down, crashed, starting up or
 * recovering).
 */
const isUnavailableSqlState = (code: string) => code.startsWith('08') || ['53300', '57P01', '57P02', '57P03'].includes(code);

/** An error and the errors it wraps (`cause`), outermost first. */
function* causes(error: unknown): Generator<object> {
  let current = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth += 1) {
    yield current;
    current = (current as { cause?: unknown }).cause;
  }
}

const codeOf = (error: object): string | null => {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : null;
};

/**
 * Whether `error` says the database cannot be reached right now (as opposed to a statement it
 * refused): the answer is then 503 `database_unavailable`, and trying again later is right. A
 * socket error counts only when it came through the database driver, never from an HTTP call.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  let throughDriver = false;
  for (const link of causes(error)) {
    if (link instanceof DatabaseConnectionError || link instanceof DrizzleQueryError) throughDriver = true;
    const code = codeOf(link);
    if (code === null) continue;
    if (DRIVER_CONNECTION_CODES.has(code)) return true;
    if (link instanceof postgres.PostgresError && isUnavailableSqlState(code)) return true;
    // postgres.js attaches the failed query to the socket errors it rejects queries with.
    if (SOCKET_CODES.has(code) && (throughDriver || 'query' in link)) return true;
  }
  return false;
}

/**
 * A stack whose top frame is postgres.js's own code: its socket handlers and timers. From the
 * sources that is node_modules/postgres; built, the driver is bundled into dist/lib/postgres-driver.js
 * (see postgres-driver.ts), which the CLI bundle imports as it is.
 */
const THROWN_BY_DRIVER = /^[^\n]*\n\s+at [^\n]*[\\/](?:node_modules[\\/]postgres[\\/]|dist[\\/]lib[\\/]postgres-driver\.js:)/;

/**
 * Whether `error` is the PostgreSQL driver's: thrown by postgres.js's own code, one of its errors,
 * or a query failure drizzle wrapped. twokey survives those (the pool reconnects, and every state
 * change was one transaction); anything else that reaches the process unhandled ends it.
 */
export function isDriverError(error: unknown): boolean {
  if (isDatabaseUnavailable(error)) return true;
  for (const link of causes(error)) {
    if (link instanceof postgres.PostgresError || link instanceof DrizzleQueryError || link instanceof DatabaseConnectionError) return true;
    if (link instanceof Error && THROWN_BY_DRIVER.test(link.stack ?? '')) return true;
  }
  return false;
}

/**
 * Why a statement failed, said plainly: drizzle wraps the database's error in "Failed query: …"
 * with the statement's text and parameters, which says which statement and hides why (and puts its
 * values wherever the message goes); the database's own error under it says why.
 */
export function plainReason(error: unknown): string {
  if (error instanceof DrizzleQueryError && error.cause instanceof Error) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}
