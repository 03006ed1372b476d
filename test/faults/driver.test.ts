import postgres from 'postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pooledClient } from '../../src/db/postgres-client.js';
import { isDatabaseUnavailable } from '../../src/lib/driver-errors.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';

/**
 * The database driver (postgres.js, patched: patches/README.md) when a session dies under it. Each
 * test kills only a backend it opened itself, on its own test database. Before the patch, the
 * first two ended the test process with an uncaught TypeError thrown from postgres.js's deferred
 * write (`nextWrite`), and a released dead connection hung the pool's next query.
 */
describeOnPostgres('the driver when a session dies', (driver) => {
  let url: string;
  let close: () => Promise<void>;
  let killer: postgres.Sql;
  const pools: postgres.Sql[] = [];
  const pool = (max: number) => {
    const sql = postgres(url, { max, onnotice: () => {} });
    pools.push(sql);
    return sql;
  };
  const backendPid = async (sql: Pick<postgres.Sql, 'unsafe'>) => Number((await sql.unsafe('select pg_backend_pid() as pid'))[0]?.pid);
  const kill = (pid: number) => killer`select pg_terminate_backend(${pid})`;

  beforeAll(async () => {
    const database = await openTestDatabase(driver, { poolSize: 1 });
    url = database.url ?? '';
    close = () => database.close();
    killer = postgres(url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    for (const sql of [...pools, killer]) await sql.end({ timeout: 1 });
    await close();
  });

  it('a reserved connection whose session died fails its queries, is not handed back by release(), and the pool serves on', async () => {
    const sql = pool(1);
    const reserved = await sql.reserve();
    const pid = await backendPid(reserved);
    await kill(pid);
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const failure = await reserved`select 1`.then(
        () => null,
        (error: unknown) => error,
      );
      expect(isDatabaseUnavailable(failure), String(failure)).toBe(true);
    }
    reserved.release();
    // The pool's only connection opens a new session for the next query.
    const next = await backendPid(sql);
    expect(next).not.toBe(pid);
  });

  it('a transaction whose session dies midway rejects, and the pool serves on', async () => {
    const sql = pool(2);
    const client = pooledClient(sql);
    let pid = 0;
    let inside: () => void = () => {};
    const started = new Promise<void>((resolve) => (inside = resolve));
    // Its outcome is taken at once: the killed session's close can reach this process before the
    // answer to pg_terminate_backend does, and a transaction rejected while nobody listened yet
    // was reported as an unhandled rejection (1 run in 5).
    const failed = client
      .begin(async (tx) => {
        pid = await backendPid(tx);
        inside();
        await tx`select pg_sleep(5)`;
      })
      .then(
        () => null,
        (error: unknown) => error,
      );
    await started;
    await kill(pid);
    const failure = await failed;
    expect(isDatabaseUnavailable(failure), String(failure)).toBe(true);
    const [row] = await client`select 41 + 1 as answer`;
    expect(row?.answer).toBe(42);
    expect(await Promise.all([backendPid(sql), backendPid(sql)])).not.toContain(pid);
  });

  it('a transaction whose end could not be confirmed discards its connection: the next one is a new session', async () => {
    const sql = pool(1);
    const client = pooledClient(sql);
    const reserved = (await sql.reserve()) as postgres.ReservedSql & { discard(): void };
    const pid = await backendPid(reserved);
    reserved.discard();
    expect(await backendPid(client)).not.toBe(pid);
  });
});
