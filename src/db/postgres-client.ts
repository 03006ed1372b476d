import type postgres from 'postgres';
import { DatabaseConnectionError } from '../lib/driver-errors.js';

/**
 * drizzle asks postgres.js for an unnamed statement on every query but its own `.prepare()`d ones,
 * and postgres.js then describes each parameterised statement before it binds it: two round trips,
 * and two socket writes, per statement (a quarter of a busy server's CPU went to those writes).
 * Named statements, kept per connection, need one round trip from their second use on. The
 * client-level option still wins: `?prepare=false` in DATABASE_URL turns them off for a pooler that
 * cannot hold them. The set of statement texts is bounded (drizzle renders each query shape to one
 * text), and postgres.js recycles connections (`max_lifetime`), which bounds what each one keeps.
 */
export function withNamedStatements<T extends Pick<postgres.Sql, 'unsafe'>>(sql: T): T {
  return new Proxy(sql, {
    get(target, property, receiver) {
      if (property !== 'unsafe') return Reflect.get(target, property, receiver) as unknown;
      const unsafe = target.unsafe.bind(target);
      return (text: string, params?: postgres.ParameterOrJSON<never>[], options?: postgres.UnsafeQueryOptions) =>
        unsafe(text, params, { ...options, prepare: true });
    },
  });
}

/** What our patch of postgres.js (patches/) adds to a reserved connection: closing it instead of returning it. */
type ReservedConnection = postgres.ReservedSql & { discard(): void };

/** PostgreSQL answered COMMIT with ROLLBACK: a statement of the transaction had failed, though nobody awaited it. */
export class TransactionRolledBackError extends Error {
  override readonly name = 'TransactionRolledBackError';
  constructor() {
    super('a statement of the transaction failed, so PostgreSQL rolled the transaction back at COMMIT');
  }
}

type TransactionWork<T> = (tx: postgres.TransactionSql) => T | Promise<T>;

/** The transaction's own handle on its connection: named statements, and savepoints for drizzle's nested transactions. */
function transactionHandle(connection: ReservedConnection): postgres.TransactionSql {
  const named = withNamedStatements(connection);
  let savepoints = 0;
  const handle: postgres.TransactionSql = new Proxy(named, {
    get(target, property, receiver) {
      if (property === 'savepoint') {
        return async (...args: unknown[]) => {
          const work = args.at(-1) as TransactionWork<unknown>;
          const name = `twokey_savepoint_${(savepoints += 1)}`;
          await connection.unsafe(`savepoint ${name}`);
          try {
            const value = await work(handle);
            await connection.unsafe(`release savepoint ${name}`);
            return value;
          } catch (error) {
            await connection.unsafe(`rollback to savepoint ${name}`);
            throw error;
          }
        };
      }
      // Only the transaction decides when its connection goes back.
      if (property === 'release' || property === 'discard') return undefined;
      return Reflect.get(target, property, receiver) as unknown;
    },
  }) as unknown as postgres.TransactionSql;
  return handle;
}

/**
 * Runs `work` between BEGIN and COMMIT on a connection reserved for it alone.
 *
 * postgres.js's own `sql.begin` sends BEGIN to whichever connection the pool picks — a busy one
 * when all are busy — and reserves it for the transaction only if that write filled neither the
 * connection's pipeline (100 queries) nor its socket buffer. Otherwise the BEGIN runs on a
 * connection the pool still shares: postgres.js rejects it with UNSAFE_TRANSACTION (a lost
 * decision), and the queries queued behind it run inside a transaction nobody will commit.
 * `sql.reserve()` waits for an idle connection instead, so nothing else is ever sent on it.
 *
 * The connection goes back to the pool only once PostgreSQL has answered COMMIT or ROLLBACK: the
 * session is then idle and outside any transaction. A connection that broke — it closed, or the
 * end of the transaction could not be confirmed — is discarded, never returned.
 */
async function inReservedTransaction<T>(pool: postgres.Sql, options: string, work: TransactionWork<T>): Promise<T> {
  const connection = (await pool.reserve().catch((error: unknown) => {
    throw new DatabaseConnectionError('no database connection could be reserved for a transaction', error);
  })) as ReservedConnection;
  let sessionIsIdle = false;
  try {
    // As postgres.js's own begin: only words (an isolation level), never anything a caller could inject.
    // Awaited before the work's first statement is sent, though sending both in one packet would save
    // a round trip: when the connection fails and postgres.js reconnects, a statement still queued
    // behind a failed BEGIN would run on the new connection outside any transaction.
    await connection.unsafe(`begin ${options.replace(/[^a-z ]/gi, '')}`);
    let value: T;
    try {
      value = await work(transactionHandle(connection));
    } catch (error) {
      sessionIsIdle = await connection`rollback`.then(
        () => true,
        () => false,
      );
      throw error;
    }
    // Sent at once, in the same packet as anything the work handed the connection without awaiting
    // it. BEGIN, COMMIT and ROLLBACK go out exactly as postgres.js's own begin sends them.
    const committed = await connection`commit`;
    sessionIsIdle = true;
    if (committed.command === 'ROLLBACK') throw new TransactionRolledBackError();
    return value;
  } finally {
    if (sessionIsIdle) connection.release();
    else connection.discard();
  }
}

/**
 * The pool as twokey uses it: every statement a named one, and every transaction (drizzle's
 * `db.transaction`, which calls `begin`) on a connection reserved for it.
 */
export function pooledClient(pool: postgres.Sql): postgres.Sql {
  const named = withNamedStatements(pool);
  return new Proxy(named, {
    get(target, property, receiver) {
      if (property !== 'begin') return Reflect.get(target, property, receiver) as unknown;
      return (...args: unknown[]) => {
        const work = args.at(-1) as TransactionWork<unknown>;
        return inReservedTransaction(pool, typeof args[0] === 'string' && args.length > 1 ? args[0] : '', work);
      };
    },
  });
}
