import type { Clock } from '../core/model.js';
import type { Database } from '../db/database.js';
import { createConsoleQueries } from '../db/console-queries.js';
import { createConsoleSessionStore } from '../db/console-session-store.js';
import type { ConsoleQueries } from './ports.js';
import { createConsoleAuth, type ConsoleAuth } from './sign-in.js';

/* The one place the console meets src/db: everything else in src/console sees only ports.ts. */

/** Sign-in links and sessions on a database and clock (the console and the CLI's admin operations). */
export function consoleAuthFor(services: { database: Pick<Database, 'db'>; clock: Clock }): ConsoleAuth {
  return createConsoleAuth({ sessions: createConsoleSessionStore(services.database.db), clock: services.clock });
}

export function consoleQueriesFor(database: Pick<Database, 'db'>): ConsoleQueries {
  return createConsoleQueries(database.db);
}
