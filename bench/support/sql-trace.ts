/**
 * The raw-SQL baseline: record every statement twokey sends while one full cycle runs, then replay
 * exactly those statements (same text, same transactions, same order) directly on a database,
 * with the identifiers one cycle creates swapped for fresh ones so replays do not collide.
 *
 * Recording sits under drizzle, at the driver (postgres.js `unsafe`/`begin`, PGlite
 * `query`/`transaction`), so it sees what really goes over the wire, including statements twokey
 * issues without drizzle's query builder.
 */
import { randomInt } from 'node:crypto';
import { Socket } from 'node:net';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { migratePostgresLocked, migrationsFolder, postgresDatabase, type Database } from '../../src/db/database.js';
import { pooledClient } from '../../src/db/postgres-client.js';
import { schema } from '../../src/db/schema.js';

type Row = Record<string, unknown>;

export interface RecordedStatement {
  text: string;
  params: unknown[];
  /** Statements of one transaction share a unit; a statement outside any transaction has its own. */
  unit: number;
  inTransaction: boolean;
  rows: Row[];
}

export class SqlRecorder {
  recording = false;
  readonly statements: RecordedStatement[] = [];
  private nextUnit = 1;

  newUnit(): number {
    return this.nextUnit++;
  }

  /**
   * The statements sent while `step` runs (and only those: what was recorded before is dropped), with
   * the value `step` returned and how many transactions they made.
   */
  async during<T>(step: () => Promise<T>): Promise<{ value: T; statements: RecordedStatement[]; transactions: number }> {
    this.statements.length = 0;
    this.recording = true;
    let value: T;
    try {
      value = await step();
    } finally {
      this.recording = false;
    }
    const statements = this.statements.slice();
    return { value, statements, transactions: new Set(statements.filter((s) => s.inTransaction).map((s) => s.unit)).size };
  }

  /** Notes a statement when it is sent; its rows are filled in when they come back. */
  note(text: string, params: readonly unknown[] | undefined, unit: number | null): RecordedStatement | null {
    if (!this.recording) return null;
    const statement = { text, params: [...(params ?? [])], unit: unit ?? this.newUnit(), inTransaction: unit !== null, rows: [] };
    this.statements.push(statement);
    return statement;
  }
}

/** Rows as objects whatever the driver's row mode (drizzle asks both drivers for arrays). */
function rowObjects(rows: unknown[], columnNames: string[]): Row[] {
  return rows.map((row) => (Array.isArray(row) ? Object.fromEntries(columnNames.map((name, i) => [name, row[i]])) : (row as Row)));
}

/** Either a client or a transaction: both send statements through `unsafe`. */
type Unsafe = Pick<postgres.Sql, 'unsafe'>;

function tracePostgres<T extends Unsafe>(sql: T, recorder: SqlRecorder, unit: number | null): T {
  return new Proxy(sql, {
    get(target, property, receiver) {
      if (property === 'unsafe') {
        return (text: string, params?: postgres.ParameterOrJSON<never>[], options?: postgres.UnsafeQueryOptions) => {
          const pending = target.unsafe(text, params, options);
          const statement = recorder.note(text, params, unit);
          if (!statement) return pending;
          // drizzle awaits the query (after `.values()`, which returns the same query object).
          const then = pending.then.bind(pending);
          return Object.assign(pending, {
            then: (onFulfilled?: (value: unknown) => unknown, onRejected?: (reason: unknown) => unknown) =>
              then((result: unknown[] & { columns?: Array<{ name: string }> }) => {
                statement.rows = rowObjects(
                  result,
                  (result.columns ?? []).map((column) => column.name),
                );
                return onFulfilled ? onFulfilled(result) : result;
              }, onRejected),
          });
        };
      }
      if (property === 'begin' && 'begin' in target) {
        const begin = target.begin as (...args: unknown[]) => Promise<unknown>;
        return (...args: unknown[]) => {
          const callback = args.pop() as (tx: postgres.TransactionSql) => unknown;
          return begin.call(target, ...args, (tx: postgres.TransactionSql) => callback(tracePostgres(tx, recorder, recorder.newUnit())));
        };
      }
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}

type QueryFunction = PGlite['query'];

function tracePgliteQuery(query: QueryFunction, recorder: SqlRecorder, unit: number | null): QueryFunction {
  return (async (text: string, params?: unknown[], options?: Parameters<QueryFunction>[2]) => {
    const statement = recorder.note(text, params, unit);
    const result = await query(text, params, options);
    if (statement)
      statement.rows = rowObjects(
        result.rows as unknown[],
        result.fields.map((field) => field.name),
      );
    return result;
  }) as QueryFunction;
}

/**
 * Counts the writes to sockets connected to `port` (the database's) while it is on: postgres.js
 * writes once per round trip, whatever it pipelines into that write.
 */
export function countDatabaseWrites(port: number): { count(): number; stop(): void } {
  const write = Socket.prototype.write;
  let writes = 0;
  Socket.prototype.write = function countedWrite(this: Socket, ...args: Parameters<Socket['write']>) {
    if (this.remotePort === port) writes += 1;
    return write.apply(this, args);
  } as Socket['write'];
  return {
    count: () => writes,
    stop: () => {
      Socket.prototype.write = write;
    },
  };
}

/** A migrated database whose every statement `recorder` can see. Same shape as `openDatabase`'s. */
export async function openRecordedDatabase(url: string | undefined, recorder: SqlRecorder): Promise<Database> {
  if (url) {
    await migratePostgresLocked(url);
    const client = postgres(url, { max: 10, onnotice: () => {} });
    // The pool as `twokey serve` has it (named statements, reserved transactions), seen by the recorder.
    const db = drizzlePostgres({ client: tracePostgres(pooledClient(client), recorder, null), schema });
    return postgresDatabase(url, client, db);
  }
  const client = new PGlite();
  const db = drizzlePglite({ client, schema });
  await migratePglite(db, { migrationsFolder });
  // Instance properties shadow the prototype's methods; PGlite's private fields rule out a Proxy.
  client.query = tracePgliteQuery(client.query.bind(client), recorder, null);
  const transaction = client.transaction.bind(client);
  client.transaction = ((callback: (tx: Transaction) => Promise<unknown>) =>
    transaction((tx) => {
      tx.query = tracePgliteQuery(tx.query.bind(tx), recorder, recorder.newUnit());
      return callback(tx);
    })) as PGlite['transaction'];
  return { db, kind: 'pglite', pglite: client, close: () => client.close() };
}

/**
 * A value one cycle created that a unique index may hold: an id (`prp_IRfqmWpYtSlTSXYw`), a token
 * or key hash, a chained audit hash. One word of at least 12 characters with a digit or mixed case,
 * and not a timestamp; statuses, operation names and free text stay as they are.
 */
const isCycleIdentifier = (value: string) =>
  /^[A-Za-z0-9_.:-]{12,}$/.test(value) && (/\d/.test(value) || (/[a-z]/.test(value) && /[A-Z]/.test(value))) && !/^\d{4}-\d{2}-\d{2}[T ]/.test(value);

/** The same shape (letters stay letters, digits stay digits, the rest as is), different value. */
function lookalike(value: string): string {
  const pick = (alphabet: string) => alphabet[randomInt(alphabet.length)] ?? '';
  return value
    .replace(/[a-z]/g, () => pick('abcdefghijklmnopqrstuvwxyz'))
    .replace(/[A-Z]/g, () => pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ'))
    .replace(/[0-9]/g, () => pick('0123456789'));
}

/** Numeric keys the database hands out (job ids, audit sequence numbers) that later statements use. */
const GENERATED_KEY_COLUMNS = new Set(['id', 'seq']);

type Execute = (text: string, params: unknown[]) => Promise<Row[]>;

export interface ReplayTarget {
  kind: 'pglite' | 'postgres';
  /** Runs `work` inside one transaction, or straight on the database when `inTransaction` is false. */
  unit(inTransaction: boolean, work: (execute: Execute) => Promise<void>): Promise<void>;
}

export function replayTarget(database: Pick<Database, 'client' | 'pglite'>): ReplayTarget {
  const { client, pglite } = database;
  if (client) {
    const on =
      (sql: Unsafe): Execute =>
      async (text, params) =>
        (await sql.unsafe(text, params as postgres.ParameterOrJSON<never>[])) as unknown as Row[];
    return {
      kind: 'postgres',
      unit: async (inTransaction, work) => {
        if (inTransaction) await client.begin((tx) => work(on(tx)));
        else await work(on(client));
      },
    };
  }
  if (!pglite) throw new Error('no database to replay on');
  const on =
    (query: QueryFunction): Execute =>
    async (text, params) =>
      (await query<Row>(text, params)).rows;
  return {
    kind: 'pglite',
    unit: async (inTransaction, work) => {
      if (inTransaction) await pglite.transaction((tx) => work(on(tx.query.bind(tx))));
      else await work(on(pglite.query.bind(pglite)));
    },
  };
}

export interface CycleReplay {
  statements: number;
  transactions: number;
  /** Replays one cycle's statements with fresh identifiers. */
  run(target: ReplayTarget): Promise<void>;
}

/**
 * Turns a recorded cycle into a replayable one. `fixed` maps values that must stay pointing at rows
 * that exist on the target (the agent's id and key hash) to their value there.
 */
export function prepareReplay(recorded: readonly RecordedStatement[], fixed: ReadonlyMap<string, string>): CycleReplay {
  // Database-generated keys seen in results, by where they appeared: (statement, row, column).
  const generated = new Map<string, { statement: number; row: number; column: string }>();
  recorded.forEach((statement, index) =>
    statement.rows.forEach((row, rowIndex) => {
      for (const [column, value] of Object.entries(row)) {
        // postgres.js hands int8 back as text, PGlite as a number.
        if (GENERATED_KEY_COLUMNS.has(column) && /^\d+$/.test(String(value)) && !generated.has(String(value))) {
          generated.set(String(value), { statement: index, row: rowIndex, column });
        }
      }
    }),
  );
  const identifiers = new Set<string>();
  for (const statement of recorded) {
    for (const param of statement.params) if (typeof param === 'string' && isCycleIdentifier(param) && !fixed.has(param)) identifiers.add(param);
  }
  // Longest first, so an identifier embedded in a longer one is not swapped piecemeal.
  const swappable = [...identifiers, ...fixed.keys()].sort((a, b) => b.length - a.length);

  // A LIMIT parameter is capped at the rows the statement returned when recorded: a replayed outbox
  // claim then takes as many jobs as twokey's did (and completes them), instead of taking a whole
  // batch whose extra jobs no replay would ever finish.
  const limitParams = recorded.map((statement) => {
    const positions = [...statement.text.matchAll(/\blimit \$(\d+)/gi)].map((match) => Number(match[1]) - 1);
    return new Set(positions.filter((position) => typeof statement.params[position] === 'number'));
  });

  const units: Array<{ inTransaction: boolean; indexes: number[] }> = [];
  const unitOf = new Map<number, { inTransaction: boolean; indexes: number[] }>();
  recorded.forEach((statement, index) => {
    let unit = unitOf.get(statement.unit);
    if (!unit) {
      unit = { inTransaction: statement.inTransaction, indexes: [] };
      unitOf.set(statement.unit, unit);
      units.push(unit);
    }
    unit.indexes.push(index);
  });

  const substitute = (param: unknown, swaps: Map<string, string>, results: Map<number, Row[]>): unknown => {
    if ((typeof param === 'number' || typeof param === 'bigint') && generated.has(String(param))) {
      const origin = generated.get(String(param));
      const value = origin ? results.get(origin.statement)?.[origin.row]?.[origin.column] : undefined;
      // The replay found no such row (a concurrent replay took that job): point at nothing.
      return value === undefined ? -1 : Number(value);
    }
    if (typeof param !== 'string') return param;
    let text = param;
    for (const original of swappable) if (text.includes(original)) text = text.split(original).join(swaps.get(original) ?? original);
    return text;
  };

  return {
    statements: recorded.length,
    transactions: units.filter((unit) => unit.inTransaction).length,
    async run(target) {
      const swaps = new Map<string, string>(fixed);
      for (const identifier of identifiers) swaps.set(identifier, lookalike(identifier));
      const results = new Map<number, Row[]>();
      for (const unit of units) {
        await target.unit(unit.inTransaction, async (execute) => {
          for (const index of unit.indexes) {
            const statement = recorded[index] as RecordedStatement;
            const params = statement.params.map((param, position) =>
              limitParams[index]?.has(position) ? Math.min(param as number, statement.rows.length) : substitute(param, swaps, results),
            );
            results.set(index, await execute(statement.text, params));
          }
        });
      }
    },
  };
}
