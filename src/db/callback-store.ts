import { and, eq } from 'drizzle-orm';
import type { CallbackStore } from '../outbox/ports.js';
import type { Db } from './database.js';
import { disabledCallbacks } from './schema.js';
import { appendAuditEvent } from './store.js';

/** Callback endpoints retired by their receiver (`410 Gone`), per agent. */
export function createCallbackStore(db: Db): CallbackStore {
  return {
    async isDisabled(agentId: string, url: string): Promise<boolean> {
      const [row] = await db
        .select({ url: disabledCallbacks.url })
        .from(disabledCallbacks)
        .where(and(eq(disabledCallbacks.agentId, agentId), eq(disabledCallbacks.url, url)));
      return row !== undefined;
    },
    /** Records the retirement and its audit event together; a repeat changes nothing. */
    async disable(agent: { id: string; name: string }, url: string, proposalId: string, at: Date): Promise<void> {
      await db.transaction(async (tx) => {
        const inserted = await tx.insert(disabledCallbacks).values({ agentId: agent.id, url, disabledAt: at }).onConflictDoNothing().returning();
        if (inserted.length === 0) return;
        // The URL may carry a receiver's own secret in its path or query: the audit keeps only its origin.
        await appendAuditEvent(
          tx,
          { type: 'callback.disabled', actor: 'system:outbox', proposalId, agentId: agent.id, data: { origin: new URL(url).origin, status: 410 } },
          at,
        );
      });
    },
  };
}
