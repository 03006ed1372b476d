import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { rowsOf } from '../../src/db/rows.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';

/**
 * The pool hands out the connection that went idle last (patches/postgres+3.4.9.patch): at low
 * load, statements one after another reach the same warm backend rather than each of the pool's
 * connections in turn.
 */
describeOnPostgres('the connection pool', (driver) => {
  let database: Database;

  beforeAll(async () => {
    database = await openTestDatabase(driver, { poolSize: 4 });
  }, 60_000);
  afterAll(async () => {
    await database?.close();
  });

  const backend = async () => rowsOf<{ pid: number }>(await database.db.execute(sql`select pg_backend_pid() as pid`))[0]!.pid;

  it('opens a connection per concurrent statement, then sends statements in turn to the one used last', async () => {
    // Four at once: the pool opens all four connections.
    const concurrent = await Promise.all(
      Array.from({ length: 4 }, async () => rowsOf<{ pid: number }>(await database.db.execute(sql`select pg_backend_pid() as pid, pg_sleep(0.05)`))[0]!.pid),
    );
    expect(new Set(concurrent).size).toBe(4);
    const inTurn: number[] = [];
    for (let i = 0; i < 8; i += 1) inTurn.push(await backend());
    expect(new Set(inTurn).size).toBe(1);
    // A transaction takes that same connection too.
    const inTransaction = await database.db.transaction(async (tx) => rowsOf<{ pid: number }>(await tx.execute(sql`select pg_backend_pid() as pid`))[0]!.pid);
    expect(inTransaction).toBe(inTurn[0]);
  });
});
