import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { describe, expect, vi } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.js';

export type Driver = 'pglite' | 'postgres';

/**
 * One template per checkout (named from its path), so two checkouts' test runs on one PostgreSQL
 * server never drop each other's template.
 */
export const TEMPLATE_DATABASE = `twokey_test_template_${createHash('sha256').update(process.cwd()).digest('hex').slice(0, 8)}`;

/**
 * The migrated in-memory PGlite that global setup dumps once per run (same naming as the template
 * database): each test database starts from it in about 0.5 s instead of 3 s of creating and migrating.
 */
export const PGLITE_TEMPLATE_FILE = join(tmpdir(), `twokey-test-pglite-${createHash('sha256').update(process.cwd()).digest('hex').slice(0, 8)}.tar`);

let pgliteTemplate: Promise<Blob | undefined> | undefined;
/** Read once per test file; without it (a run that skipped global setup) each database migrates itself. */
function readPgliteTemplate(): Promise<Blob | undefined> {
  pgliteTemplate ??= readFile(PGLITE_TEMPLATE_FILE).then(
    (bytes) => new Blob([bytes]),
    () => undefined,
  );
  return pgliteTemplate;
}

/** Every database test runs on PGlite, and on PostgreSQL too when CI (or you) set TEST_DATABASE_URL. */
export const drivers: Driver[] = process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

/**
 * A suite that only means something on PostgreSQL (replicas, elections, outages). Without
 * TEST_DATABASE_URL it is reported as skipped, so a local run shows what it did not cover;
 * `.ci/run` always sets it and fails when PostgreSQL cannot be reached.
 */
export function describeOnPostgres(name: string, body: (driver: 'postgres') => void): void {
  describe.skipIf(!process.env.TEST_DATABASE_URL)(`${name} (postgres)`, () => body('postgres'));
}

export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set');
  return url;
}

export function databaseUrlFor(name: string): string {
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A fresh, migrated database: in-memory PGlite loaded from the dump global setup made, or a PostgreSQL
 * database cloned from the template that global setup migrated (~50 ms instead of a migration per file).
 */
export async function openTestDatabase(driver: Driver, options: { poolSize?: number } = {}): Promise<Database & { url?: string }> {
  if (driver === 'pglite') {
    const template = await readPgliteTemplate();
    return openDatabase({ dataDir: '', memory: true, ...(template ? { memoryTemplate: template } : {}) });
  }
  const name = `twokey_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
  const url = databaseUrlFor(name);
  const database = await reportIfSlow(`creating and opening ${name}`, async () => {
    try {
      await admin.unsafe(`create database ${name} template ${TEMPLATE_DATABASE}`);
    } finally {
      await admin.end();
    }
    return openDatabase({ databaseUrl: url, dataDir: '', poolSize: options.poolSize ?? 20 });
  });
  return {
    ...database,
    url,
    close: async () => {
      await database.close();
      const cleanup = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {} });
      try {
        await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await cleanup.end();
      }
    },
  };
}

/** Far beyond the ~50 ms creating a database from the template takes, yet well inside a hook's 60 s. */
const SLOW_SETUP_MS = 15_000;

/**
 * Runs `step`, and should it still run after SLOW_SETUP_MS, prints what the whole server is doing
 * then: which backends are active or waiting, on what, and which locks are not granted. Twice a full
 * run hung in creating a test database for a minute, with no trace of what held it; this is that trace.
 */
async function reportIfSlow<T>(what: string, step: () => Promise<T>): Promise<T> {
  const timer = setTimeout(() => void printServerActivity(`${what} has taken over ${SLOW_SETUP_MS / 1000} s`), SLOW_SETUP_MS);
  try {
    return await step();
  } finally {
    clearTimeout(timer);
  }
}

async function printServerActivity(headline: string): Promise<void> {
  const observer = postgres(testDatabaseUrl(), { max: 1, onnotice: () => {}, connect_timeout: 5, idle_timeout: 1 });
  try {
    const activity = await observer`select pid, datname, backend_type, state, wait_event_type, wait_event,
        round(extract(epoch from clock_timestamp() - query_start)::numeric, 1) as seconds, left(query, 200) as query
      from pg_stat_activity where pid <> pg_backend_pid()
        and (case when backend_type = 'client backend' then state <> 'idle' else wait_event is distinct from null and wait_event not like '%Main' end)`;
    const waiting = await observer`select pid, locktype, mode, database, relation, objid from pg_locks where not granted`;
    const lines = (rows: readonly object[]) => rows.map((row) => JSON.stringify(row)).join('\n') || '(none)';
    console.error(`${headline}; server activity:\n${lines(activity)}\nlocks not granted:\n${lines(waiting)}`);
  } catch (error) {
    console.error(`${headline}; the server's activity could not be read: ${(error as Error).message}`);
  } finally {
    await observer.end({ timeout: 1 });
  }
}

/**
 * Cuts the connection of the statement now sleeping in `pg_sleep` on the database at `url` (a test's
 * trigger holding it there), once one is: a batch whose fate its sender cannot know. Only the
 * sleeper, never another statement of the same text still running beside it.
 */
export async function cutSleepingStatement(url: string): Promise<void> {
  const killer = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await vi.waitFor(
      async () => {
        const [row] = await killer`select pg_terminate_backend(pid) as killed from pg_stat_activity
          where datname = current_database() and state = 'active' and wait_event = 'PgSleep' and pid <> pg_backend_pid()`;
        expect(row?.killed).toBe(true);
      },
      { timeout: 4_000, interval: 20 },
    );
  } finally {
    await killer.end();
  }
}
