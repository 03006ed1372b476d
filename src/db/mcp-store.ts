import { eq } from 'drizzle-orm';
import type { McpStore } from '../mcp/ports.js';
import type { Db } from './database.js';
import { mcpClients } from './schema.js';

/**
 * Data access of the MCP server (src/mcp): what each agent's client declared. SQL only. Which proposal
 * answers a call is the request identity every way in shares (src/db/request-identity-store.ts).
 */
export function createMcpStore(db: Db): McpStore {
  return {
    async rememberClient(agentId: string, urlElicitation: boolean, now: Date): Promise<void> {
      await db
        .insert(mcpClients)
        .values({ agentId, urlElicitation, updatedAt: now })
        .onConflictDoUpdate({ target: mcpClients.agentId, set: { urlElicitation, updatedAt: now } });
    },
    async clientSupportsUrlElicitation(agentId: string): Promise<boolean> {
      const [row] = await db.select({ url: mcpClients.urlElicitation }).from(mcpClients).where(eq(mcpClients.agentId, agentId));
      return row?.url ?? false;
    },
  };
}
