import { and, eq } from 'drizzle-orm';
import type { Db } from './database.js';
import { chatMessages } from './schema.js';

export type ChatMessageRow = typeof chatMessages.$inferSelect;

/** Data access for the chat message of each proposal on each platform. */
export function createChatMessageStore(db: Db) {
  const where = (proposalId: string, platform: string) => and(eq(chatMessages.proposalId, proposalId), eq(chatMessages.platform, platform));
  return {
    async get(proposalId: string, platform: string): Promise<ChatMessageRow | null> {
      const [row] = await db.select().from(chatMessages).where(where(proposalId, platform));
      return row ?? null;
    },
    async insert(row: Omit<ChatMessageRow, 'trailPosted'>): Promise<void> {
      await db.insert(chatMessages).values({ ...row, trailPosted: null }).onConflictDoNothing();
    },
    async setRendered(proposalId: string, platform: string, renderedVersion: string): Promise<void> {
      await db.update(chatMessages).set({ renderedVersion }).where(where(proposalId, platform));
    },
    async setTrailPosted(proposalId: string, platform: string, at: Date): Promise<void> {
      await db.update(chatMessages).set({ trailPosted: at }).where(where(proposalId, platform));
    },
  };
}

export type ChatMessageStore = ReturnType<typeof createChatMessageStore>;
