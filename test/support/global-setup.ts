import { rename, writeFile } from 'node:fs/promises';
import postgres from 'postgres';
import { migratePostgresLocked, openDatabase } from '../../src/db/database.js';
import { PGLITE_TEMPLATE_FILE, TEMPLATE_DATABASE, databaseUrlFor } from './database.js';

/** One migrated in-memory PGlite, dumped for every test database to start from (written whole, then renamed). */
async function dumpPgliteTemplate(): Promise<void> {
  const database = await openDatabase({ dataDir: '', memory: true });
  try {
    const dump = await database.pglite!.dumpDataDir('none');
    const partial = `${PGLITE_TEMPLATE_FILE}.${process.pid}`;
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()), { mode: 0o600 });
    await rename(partial, PGLITE_TEMPLATE_FILE);
  } finally {
    await database.close();
  }
}

/**
 * With TEST_DATABASE_URL set, PostgreSQL must be reachable: an unreachable database fails the run
 * here instead of silently skipping the PostgreSQL half of the suite.
 */
export default async function setup(): Promise<void> {
  await dumpPgliteTemplate();
  const url = process.env.TEST_DATABASE_URL;
  if (!url) return;
  const admin = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await admin.unsafe(`drop database if exists ${TEMPLATE_DATABASE} with (force)`);
    await admin.unsafe(`create database ${TEMPLATE_DATABASE}`);
  } catch (error) {
    throw new Error(`TEST_DATABASE_URL is set but PostgreSQL is not usable: ${(error as Error).message}`, { cause: error });
  } finally {
    await admin.end();
  }
  await migratePostgresLocked(databaseUrlFor(TEMPLATE_DATABASE));
}
