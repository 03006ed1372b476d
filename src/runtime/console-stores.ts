import type { ConsoleStores } from '../console/ports.js';
import type { Database } from '../db/database.js';
import { createConsoleQueries } from '../db/console-queries.js';
import { createConsoleSessionStore } from '../db/console-session-store.js';

/** The console's storage on a database: src/console sees only its ports.ts, src/db implements them. */
export function consoleStoresFor(database: Pick<Database, 'db'>): ConsoleStores {
  return { sessions: createConsoleSessionStore(database.db), queries: createConsoleQueries(database.db) };
}
