import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Db } from './database.js';
import { mcpCalls, mcpClients } from './schema.js';

export type CallClaim = { claimed: true } | { claimed: false; proposalId: string | null };

/**
 * Data access of the MCP server (src/mcp): which proposal answers an MCP call, and what each agent's
 * client declared. SQL only; the rules live in src/mcp/calls.ts.
 */
export function createMcpStore(db: Db) {
  return {
    /**
     * Takes the call's key unless a live proposal already answers it or another caller is proposing
     * right now. One statement, so two replicas racing on one key cannot both win. A proposal
     * "answers" the key while it is open, or until its expiry once decided (so a repeated call gets the
     * decision, not a new request); a cancelled one never does.
     */
    async claim(key: string, agentId: string, now: Date, claimMs: number): Promise<CallClaim> {
      // Raw SQL parameters go to the driver as they are, and postgres.js takes no Date there: ISO text, cast.
      const until = sql`${new Date(now.getTime() + claimMs).toISOString()}::timestamptz`;
      const at = sql`${now.toISOString()}::timestamptz`;
      const won = await db.execute<{ key: string }>(sql`
        insert into mcp_calls (key, agent_id, proposal_id, claimed_until, updated_at)
        values (${key}, ${agentId}, null, ${until}, ${at})
        on conflict (key) do update set proposal_id = null, claimed_until = excluded.claimed_until, updated_at = excluded.updated_at
        where (mcp_calls.proposal_id is null and mcp_calls.claimed_until < ${at})
           or (mcp_calls.proposal_id is not null and not exists (
                select 1 from proposals p
                 where p.id = mcp_calls.proposal_id and p.status <> 'cancelled'
                   and (p.expires_at > ${at} or p.status in ('pending', 'executing'))))
        returning key`);
      const rows = Array.isArray(won) ? won : (won as { rows: unknown[] }).rows;
      if (rows.length > 0) return { claimed: true };
      const [row] = await db.select({ proposalId: mcpCalls.proposalId }).from(mcpCalls).where(eq(mcpCalls.key, key));
      return { claimed: false, proposalId: row?.proposalId ?? null };
    },
    async record(key: string, proposalId: string, now: Date): Promise<void> {
      await db.update(mcpCalls).set({ proposalId, claimedUntil: now, updatedAt: now }).where(eq(mcpCalls.key, key));
    },
    /** Gives the key back after a failed proposal, so the next call need not wait for the claim to run out. */
    async release(key: string): Promise<void> {
      await db.delete(mcpCalls).where(and(eq(mcpCalls.key, key), isNull(mcpCalls.proposalId)));
    },
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

export type McpStore = ReturnType<typeof createMcpStore>;
