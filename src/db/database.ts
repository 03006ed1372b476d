import { createHash } from 'node:crypto';
import { access, chmod, mkdir, readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from '../lib/postgres-driver.js';
import lockfile from 'proper-lockfile';
import { DATA_DIR_LOCK_STALE_MS, DataDirLockedError, dataDirLockFile } from './data-dir-lock.js';
import { createEmbeddedStorage, explainOpenFailure, type StorageLog } from './embedded-storage.js';
import { createNotifier, type Notifier } from './notifier.js';
import { raiseWasmTieringBudget } from './wasm-tiering.js';
import { pooledClient } from './postgres-client.js';
import { schema } from './schema.js';
import { rowsOf } from './rows.js';

export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;
/** The database or a transaction on it: what a query needs to run (not the core's operation `Executor`). */
export type Queryable = Pick<Db, 'select' | 'insert' | 'update' | 'execute'>;

export interface Database {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** postgres.js client, for LISTEN/NOTIFY and raw benchmarks; absent on PGlite. */
  client?: postgres.Sql;
  /** The PostgreSQL URL, for connections of their own (advisory-lock elections); absent on PGlite. */
  url?: string;
  /** The embedded database, for raw benchmarks; absent on PostgreSQL. */
  pglite?: PGlite;
  /** Wakes the other replicas after a change commits; absent on PGlite, which serves one process. */
  notifier?: Notifier;
  /**
   * Why the database cannot take writes now, known without asking it (the embedded database's disk
   * is short of space), or null. Absent where nothing is watched.
   */
  storageProblem?(): string | null;
  close(): Promise<void>;
}

export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** Any constant works; it only has to be the same for every twokey process on one database. */
const MIGRATION_LOCK_KEY = 0x74776f6b; // "twok"

export { DataDirLockedError, isDataDirLocked } from './data-dir-lock.js';

export const pgliteDirectory = (dataDir: string): string => join(resolve(dataDir), 'pglite');

/**
 * PGlite puts no lock on its directory and two processes writing one directory lose rows silently
 * (tried: rows written by one were missing for the other), so twokey holds a lock of its own for as long as the database is open.
 * A crashed holder's lock goes stale after 5 seconds; a start waits that long before refusing.
 */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const dir = resolve(dataDir);
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR });
  try {
    return await lockfile.lock(dir, {
      lockfilePath: dataDirLockFile(dir),
      stale: DATA_DIR_LOCK_STALE_MS,
      update: 1_000,
      // A holder killed with -9 leaves its lock until it goes stale: wait that long before refusing.
      retries: { retries: 7, minTimeout: 1_000, maxTimeout: 1_000, factor: 1 },
      realpath: false,
      onCompromised: (error) => {
        // Another process took the directory: carrying on would corrupt it.
        console.error(`twokey: lost the data directory lock (${error.message}); exiting`);
        process.exit(70);
      },
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOCKED') throw new DataDirLockedError(dir);
    throw error;
  }
}

/**
 * PGlite creates its files 0666: on a shared host anyone could read the tokens' hashes and the audit
 * chain, or rewrite them. The directory twokey creates is 0700 and everything in it 0600/0700; files
 * PGlite adds later are unreachable through the 0700 directory whatever their own mode.
 */
const PRIVATE_DIR = 0o700;
const PRIVATE_FILE = 0o600;

async function makePrivate(path: string): Promise<void> {
  await chmod(path, PRIVATE_DIR);
  for (const entry of await readdir(path, { withFileTypes: true, recursive: true })) {
    const full = join(entry.parentPath, entry.name);
    if (entry.isDirectory()) await chmod(full, PRIVATE_DIR);
    else if (entry.isFile()) await chmod(full, PRIVATE_FILE);
  }
}

/**
 * PGlite's own start parameters, with a smaller buffer pool. PostgreSQL's default 128 MB pool is
 * initialised on every start, in WebAssembly on the main thread: measured here at about 0.4 s of CPU of
 * a start on an existing database, for a cache twokey's data (proposals and their audit rows, pruned)
 * does not fill. Pages it evicts are still in the operating system's cache. Durability is untouched:
 * this is a cache size, not a flush setting.
 */
const PGLITE_START_PARAMS = [...PGlite.defaultStartParams, '-c', 'shared_buffers=32MB'];

/**
 * PGlite's WebAssembly module and the bundle of PostgreSQL's own files (timezones, catalogs' SQL),
 * read and compiled once per process, from the first database asked for. Left to PGlite, both are
 * read after its other set-up, in 512 KiB steps that each wait for a turn of the event loop, which
 * `twokey serve` is then busy loading its modules and reading its configuration: the reads finished
 * a few hundred milliseconds late and the compile came after them. Here both are read from the
 * first open, while the data directory is locked, and V8 checks the module on a background thread
 * while the main thread loads the server.
 */
let pgliteArtifacts: Promise<Pick<PGliteOptions, 'pgliteWasmModule' | 'fsBundle'>> | undefined;

/** Node's global, which this project's type libraries (ES2023, Node's, no DOM) leave undeclared. */
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<NonNullable<PGliteOptions['pgliteWasmModule']>> };

function loadPgliteArtifacts(): Promise<Pick<PGliteOptions, 'pgliteWasmModule' | 'fsBundle'>> {
  pgliteArtifacts ??= (async () => {
    raiseWasmTieringBudget();
    const packaged = createRequire(import.meta.url);
    const read = (file: string) => readFile(packaged.resolve(`@electric-sql/pglite/${file}`));
    const [pgliteWasmModule, data] = await Promise.all([read('pglite.wasm').then((bytes) => WebAssembly.compile(bytes)), read('pglite.data')]);
    return { pgliteWasmModule, fsBundle: new Blob([data]) };
  })().catch((error: unknown) => {
    // A read that failed (too many open files, say) is tried again by the next open.
    pgliteArtifacts = undefined;
    throw error;
  });
  return pgliteArtifacts;
}

/**
 * Waits for PGlite to start with a timer holding Node's event loop open. PGlite's start waits on
 * promises and on V8's WebAssembly compile jobs, none of which keeps the loop alive; whenever the
 * loop has nothing left, Node blocks the main thread until every V8 background job is done, and
 * here that is the optimising compile of the functions PostgreSQL's start just ran. Measured: the
 * first file operation after a start waited 0.1 to 0.5 s for it, with the main thread idle.
 */
async function started(client: PGlite): Promise<PGlite> {
  const keepLoopTurning = setInterval(() => undefined, 60_000);
  try {
    await client.waitReady;
    return client;
  } finally {
    clearInterval(keepLoopTurning);
  }
}

/** Opens PGlite with a umask that keeps group and others out of every file it creates while it starts. */
async function openPrivatePglite(directory: string): Promise<PGlite> {
  await mkdir(directory, { recursive: true, mode: PRIVATE_DIR });
  // A database made here before was made private then; what PGlite adds now is private by the umask, and
  // the 0700 directory keeps out anyone even from a file that is not. Walking its thousand files again
  // on every start is a cost with nothing to gain, so an existing directory only has its own mode set.
  const existing = await access(join(directory, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  // Awaited before the umask is narrowed: it is the process's, and other work goes on meanwhile.
  const artifacts = await loadPgliteArtifacts();
  const previous = process.umask(0o077);
  try {
    return await started(new PGlite(directory, { startParams: PGLITE_START_PARAMS, ...artifacts }));
  } finally {
    process.umask(previous);
    if (existing) await chmod(directory, PRIVATE_DIR);
    else await makePrivate(directory);
  }
}

export interface OpenOptions {
  databaseUrl?: string | undefined;
  dataDir: string;
  /** In-memory PGlite, for tests. */
  memory?: boolean;
  /**
   * With `memory`: start from this dump of an already migrated database (`PGlite.dumpDataDir`) instead
   * of creating one and running every migration: about 0.5 s instead of 3 s, which a test suite that
   * opens hundreds of databases pays each time.
   */
  memoryTemplate?: Blob;
  poolSize?: number;
  /**
   * The embedded database's disk: writes are refused below `minFreeBytes` free, and a full disk
   * never hangs the process (see embedded-storage.ts). Without it, only a PANIC is guarded against.
   */
  storage?: { minFreeBytes: number; log: StorageLog; checkIntervalMs?: number };
}

/** Without a logger the guard still refuses, but says nothing. */
const silentLog: StorageLog = { error: () => undefined, warn: () => undefined, info: () => undefined };

export async function openDatabase(options: OpenOptions): Promise<Database> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.poolSize ?? 10);
  if (options.memory) {
    const client = await started(
      new PGlite({
        startParams: PGLITE_START_PARAMS,
        ...(await loadPgliteArtifacts()),
        ...(options.memoryTemplate ? { loadDataDir: options.memoryTemplate } : {}),
      }),
    );
    const db = drizzlePglite({ client, schema });
    // A template made from older migrations is brought up to date like any database.
    if (!(options.memoryTemplate && (await isMigrated(db)))) await migratePglite(db, { migrationsFolder });
    return { db, kind: 'pglite', pglite: client, close: () => client.close() };
  }
  // Under way while the directory is locked.
  void loadPgliteArtifacts().catch(() => undefined);
  const release = await lockDataDir(options.dataDir);
  try {
    const directory = pgliteDirectory(options.dataDir);
    const minFreeBytes = options.storage?.minFreeBytes ?? 0;
    const first = await openPrivatePglite(directory).catch(async (error: unknown) => {
      throw await explainOpenFailure(error, options.dataDir, minFreeBytes);
    });
    const storage = createEmbeddedStorage(first, () => openPrivatePglite(directory), {
      dataDir: resolve(options.dataDir),
      minFreeBytes,
      log: options.storage?.log ?? silentLog,
      ...(options.storage?.checkIntervalMs === undefined ? {} : { checkIntervalMs: options.storage.checkIntervalMs }),
    });
    const db = drizzlePglite({ client: storage.client, schema });
    const migrated = await isMigrated(db)
      .then(async (current) => {
        if (current) return false;
        await migratePglite(db, { migrationsFolder });
        return true;
      })
      .catch(async (error: unknown) => {
        await storage.close().catch(() => undefined);
        throw error;
      });
    // Migrations write files after the umask is restored; without them there is nothing new to fix.
    if (migrated) await makePrivate(directory);
    await storage.start();
    return {
      db,
      kind: 'pglite',
      get pglite() {
        return storage.current();
      },
      storageProblem: () => storage.problem(),
      close: async () => {
        await storage.close();
        await release();
      },
    };
  } catch (error) {
    await release();
    throw error;
  }
}

/**
 * Seconds a closed pool connection waits before it reconnects. postgres.js's own default grows with
 * every failed attempt to 10–20 s, and each connection keeps the delay it drew when it closed: after
 * a few seconds of outage, statements queued on such a connection waited up to 20 s once the
 * database was back (the outbox stalled, /readyz was already green). Capped at 2 s, with jitter so
 * a fleet of replicas does not reconnect in step.
 */
export function reconnectDelaySeconds(failedAttempts: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** failedAttempts, 2);
}

/**
 * How long a connection attempt may take (postgres.js waits 30 s). A database that drops packets
 * rather than refusing them would otherwise hold every request that long before its 503.
 */
export const CONNECT_TIMEOUT_SECONDS = 10;

async function openPostgres(url: string, poolSize: number): Promise<Database> {
  await migratePostgresLocked(url);
  const client = postgres(url, { max: poolSize, onnotice: () => {}, backoff: reconnectDelaySeconds, connect_timeout: CONNECT_TIMEOUT_SECONDS });
  return postgresDatabase(url, client, drizzlePostgres({ client: pooledClient(client), schema }));
}

/** A PostgreSQL database over `client`, with the notifier that wakes other replicas; closing closes both. */
export function postgresDatabase(url: string, client: postgres.Sql, db: Db): Database {
  const notifier = createNotifier(url, { backoff: reconnectDelaySeconds });
  return {
    db,
    kind: 'postgres',
    client,
    url,
    notifier,
    async close() {
      await notifier.close();
      await client.end({ timeout: 5 });
    },
  };
}

/**
 * Whether the database already has every migration, by drizzle's own record: its newest row names the
 * newest migration's time and the hash of that file. Drizzle's migrator reads and hashes every
 * migration, creates its schema and table if missing, and commits an empty transaction before it
 * finds nothing to do; this is one small query and one file. Anything unexpected (no table yet, an
 * older or different migration) leaves the decision to the migrator.
 */
async function isMigrated(db: Db): Promise<boolean> {
  const journal = JSON.parse(await readFile(join(migrationsFolder, 'meta/_journal.json'), 'utf8')) as { entries: Array<{ tag: string; when: number }> };
  const newest = journal.entries.at(-1);
  if (!newest) return true;
  const hash = createHash('sha256')
    .update(await readFile(join(migrationsFolder, `${newest.tag}.sql`), 'utf8'))
    .digest('hex');
  try {
    const result = await db.execute(sql`select hash, created_at from drizzle.__drizzle_migrations order by created_at desc limit 1`);
    const [row] = rowsOf<{ hash: string; created_at: string | number }>(result);
    return row !== undefined && row.hash === hash && Number(row.created_at) === newest.when;
  } catch {
    return false;
  }
}

/** Several replicas starting at once must not migrate concurrently (3 of 4 failed without this lock). */
export async function migratePostgresLocked(url: string): Promise<void> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const db = drizzlePostgres({ client, schema });
    if (await isMigrated(db)) return;
    await db.execute(sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`);
    try {
      await migratePostgres(db, { migrationsFolder });
    } finally {
      await db.execute(sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`);
    }
  } finally {
    await client.end({ timeout: 5 });
  }
}
