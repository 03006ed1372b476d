import { and, eq } from 'drizzle-orm';
import type { Db } from './database.js';
import { resumeStates } from './schema.js';

export function createResumeStateStore(db: Db) {
  return {
    async put(proposalId: string, agentId: string, sealed: Record<string, unknown>, at: Date): Promise<void> {
      await db
        .insert(resumeStates)
        .values({ proposalId, agentId, sealed, updatedAt: at })
        .onConflictDoUpdate({ target: resumeStates.proposalId, set: { sealed, updatedAt: at } });
    },
    async get(proposalId: string, agentId: string): Promise<Record<string, unknown> | null> {
      const [row] = await db
        .select({ sealed: resumeStates.sealed })
        .from(resumeStates)
        .where(and(eq(resumeStates.proposalId, proposalId), eq(resumeStates.agentId, agentId)));
      return row?.sealed ?? null;
    },
  };
}

export type ResumeStateStore = ReturnType<typeof createResumeStateStore>;
