import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import { DrizzleQueryError } from 'drizzle-orm';
import { pino } from 'pino';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { DatabaseConnectionError, isDatabaseUnavailable, isDriverError } from '../../src/lib/driver-errors.js';
import { loggerOptions } from '../../src/runtime/logger.js';
import { handleProcessFaults, type FaultSource } from '../../src/runtime/process-faults.js';
import { freePort } from '../support/processes.js';

/** A real postgres.js failure: a connection to a port nothing listens on. */
async function refusedConnection(): Promise<unknown> {
  const sql = postgres(`postgres://postgres@127.0.0.1:${await freePort()}/postgres`, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    return await sql`select 1`.then(
      () => null,
      (error: unknown) => error,
    );
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** The TypeError postgres.js 3.4.9 threw from a timer when PostgreSQL restarted, with its stack. */
function nextWriteCrash(): TypeError {
  const error = new TypeError("Cannot read properties of null (reading 'write')");
  error.stack = `TypeError: ${error.message}
    at Immediate.nextWrite (file:///srv/twokey/node_modules/postgres/src/connection.js:255:22)
    at process.processImmediate (node:internal/timers:483:21)`;
  return error;
}

/** What `fetch` rejects with when a downstream refuses the connection: the same socket code, not the database's. */
function refusedFetch(): TypeError {
  return new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) });
}

describe('which errors say the database is unreachable', () => {
  it('a refused connection, as postgres.js reports it and as drizzle wraps it', async () => {
    const refused = await refusedConnection();
    expect(isDatabaseUnavailable(refused)).toBe(true);
    expect(isDatabaseUnavailable(new DrizzleQueryError('select 1', [], refused as Error))).toBe(true);
    expect(isDatabaseUnavailable(new DatabaseConnectionError('no connection', refused))).toBe(true);
  });

  it('a server shutting down or starting up, by its SQLSTATE; not a statement the server refused', () => {
    const shutdown = new postgres.PostgresError({ code: '57P01', message: 'terminating connection due to administrator command', severity: 'FATAL' } as never);
    const refusedStatement = new postgres.PostgresError({ code: '23505', message: 'duplicate key value', severity: 'ERROR' } as never);
    expect(isDatabaseUnavailable(shutdown)).toBe(true);
    expect(isDatabaseUnavailable(new DrizzleQueryError('insert …', [], refusedStatement))).toBe(false);
  });

  it('not an HTTP call that failed with the same socket code, nor a bug', () => {
    expect(isDatabaseUnavailable(refusedFetch())).toBe(false);
    expect(isDatabaseUnavailable(new TypeError('undefined is not a function'))).toBe(false);
    expect(isDatabaseUnavailable(nextWriteCrash())).toBe(false);
  });
});

describe('which errors are the database driver’s', () => {
  it('postgres.js’s own failures, thrown from its code or rejected as its errors', async () => {
    expect(isDriverError(nextWriteCrash())).toBe(true);
    expect(isDriverError(await refusedConnection())).toBe(true);
    expect(isDriverError(new DrizzleQueryError('select 1', [], new Error('boom')))).toBe(true);
  });

  it('the same crash thrown by the built package, whose driver is bundled into dist/lib/postgres-driver.js', () => {
    const built = nextWriteCrash();
    built.stack = built.stack!.replace('node_modules/postgres/src/connection.js:255:22', 'node_modules/twokey/dist/lib/postgres-driver.js:1032:22');
    expect(isDriverError(built)).toBe(true);
    // Only that file: a module of twokey's own whose name merely starts alike is twokey's.
    const lookalike = nextWriteCrash();
    lookalike.stack = lookalike.stack!.replace('node_modules/postgres/src/connection.js', 'dist/lib/postgres-driver-errors.js');
    expect(isDriverError(lookalike)).toBe(false);
  });

  it('not twokey’s own bugs, even when postgres.js called the code that threw', () => {
    const ours = new TypeError("Cannot read properties of undefined (reading 'id')");
    ours.stack = `TypeError: ${ours.message}
    at notify (file:///srv/twokey/src/core/changes.ts:40:11)
    at onnotify (file:///srv/twokey/node_modules/postgres/src/index.js:162:9)`;
    expect(isDriverError(ours)).toBe(false);
    expect(isDriverError(refusedFetch())).toBe(false);
    expect(isDriverError('a string')).toBe(false);
  });
});

describe('the last-resort policy of `twokey serve`', () => {
  function setUp() {
    const lines: string[] = [];
    const logger = pino(
      loggerOptions('info'),
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    const source = new EventEmitter();
    const exits: number[] = [];
    const remove = handleProcessFaults({ logger, source: source as unknown as FaultSource, exit: (code) => exits.push(code) });
    return { lines, source, exits, remove };
  }

  it('logs a driver error and carries on', () => {
    const { lines, source, exits, remove } = setUp();
    source.emit('uncaughtException', nextWriteCrash());
    source.emit('unhandledRejection', new DrizzleQueryError('select 1', [], new Error('Connection terminated')));
    expect(exits).toEqual([]);
    expect(lines.map((line) => JSON.parse(line) as { level: number; msg: string }).map(({ level, msg }) => [level, msg])).toEqual([
      [50, 'database driver uncaught exception; twokey carries on, the driver reconnects'],
      [50, 'database driver unhandled rejection; twokey carries on, the driver reconnects'],
    ]);
    remove();
  });

  it('logs anything else as fatal, secrets scrubbed, and exits with 1 once the line is written', async () => {
    const { lines, source, exits, remove } = setUp();
    const secret = `tk_agent_${'a'.repeat(43)}`;
    source.emit('uncaughtException', new Error(`a bug that held ${secret}`));
    await new Promise((flushed) => setImmediate(flushed));
    expect(exits).toEqual([1]);
    const [line] = lines;
    expect(JSON.parse(line ?? '{}')).toMatchObject({ level: 60, msg: 'uncaught exception; exiting so that a supervisor starts twokey again' });
    expect(line).not.toContain(secret);
    remove();
    expect(source.listenerCount('uncaughtException') + source.listenerCount('unhandledRejection')).toBe(0);
  });
});
