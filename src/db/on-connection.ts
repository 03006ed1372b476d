import type { Db, Queryable } from './database.js';

// Statements the store runs on a transaction's own connection (src/db/store.ts), prepared once per
// process, and sent together where one must follow the other.

/**
 * A row lock and a read that must see what the lock's previous holder committed, sent together.
 * A transaction's statements run one after another on its connection, and under READ COMMITTED
 * each takes its snapshot when it starts, so the read still starts only once the lock is held;
 * sending both at once (postgres.js writes them in one packet) saves a round trip. Order matters:
 * both go through the same drizzle path, which hands them to the driver in the order they are
 * awaited here (PGlite runs them one after the other anyway).
 */
export async function lockedThenRead<L, R>(lock: PromiseLike<L>, read: PromiseLike<R>): Promise<[L, R]> {
  return Promise.all([lock, read]);
}

/** A statement drizzle prepared on the database, as far as running it goes. */
interface Prepared<R> {
  execute(values?: Record<string, unknown>): Promise<R>;
}

/**
 * `statement`, prepared once on the database, run on the transaction's connection instead. drizzle
 * binds a prepared statement to the session it was built on, and a transaction's session differs only
 * by its client (the reserved connection on PostgreSQL, PGlite's transaction): the same statement
 * with that client in place of the pool's. Checked, not assumed: run on the pool, a `for update`
 * would hold its lock for no transaction at all.
 */
export function onConnectionOf<R>(tx: Queryable, statement: Prepared<R>): Prepared<R> {
  const session = (tx as Partial<Pick<Db, '_'>>)._?.session as { client?: unknown } | undefined;
  if (!session?.client || !Object.hasOwn(statement, 'client')) {
    throw new Error("drizzle's transaction or prepared statement no longer has the shape the store relies on");
  }
  return Object.create(statement, { client: { value: session.client } }) as Prepared<R>;
}
