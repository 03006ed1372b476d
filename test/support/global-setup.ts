import postgres from 'postgres';
import { migratePostgresLocked } from '../../src/db/database.js';
import { TEMPLATE_DATABASE, databaseUrlFor } from './database.js';

/**
 * With TEST_DATABASE_URL set, PostgreSQL must be reachable: an unreachable database fails the run
 * here instead of silently skipping the PostgreSQL half of the suite.
 */
export default async function setup(): Promise<void> {
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
