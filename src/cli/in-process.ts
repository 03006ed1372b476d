import { runAdminOperation } from '../admin/operations.js';
import { loadConfigFile, resolveConfigPath } from '../config/config-file.js';
import type { Env } from '../config/env.js';
import { openDatabase } from '../db/database.js';
import { createUpstreamClients, withUpstreamOperations } from '../mcp/upstreams.js';
import { createServices } from '../runtime/services.js';

/**
 * An operator command run in the CLI's own process, when no server holds the data: on PostgreSQL,
 * or on an embedded database nobody has open. Loads the config, the database and the services.
 */
export async function runHere(env: Env, name: string, input: unknown): Promise<unknown> {
  const upstreamClients = createUpstreamClients();
  try {
    // Proposals of upstream tools are decided (and run) here too: the CLI needs those operations.
    const config = await withUpstreamOperations(loadConfigFile(resolveConfigPath(env), process.env), upstreamClients);
    const database = await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.TWOKEY_DATA_DIR, poolSize: 2 });
    try {
      return await runAdminOperation(createServices({ database, config, upstreamClients }), name, input);
    } finally {
      await database.close();
    }
  } finally {
    await upstreamClients.closeAll();
  }
}
