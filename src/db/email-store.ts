import { and, eq, gt, isNull } from 'drizzle-orm';
import type { EmailLinkRow, EmailMessageRow, EmailStore } from '../email/ports.js';
import type { Db } from './database.js';
import { emailLinks, emailMessages } from './schema.js';

// The tables' rows are email's own; these fail to compile when the two drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const sameLink: Same<typeof emailLinks.$inferSelect, EmailLinkRow> = true;
const sameMessage: Same<typeof emailMessages.$inferSelect, EmailMessageRow> = true;
void sameLink;
void sameMessage;

/** Data access for emailed decision links and the mails that carried them. */
export function createEmailStore(db: Db): EmailStore {
  const message = (proposalId: string, recipient: string) => and(eq(emailMessages.proposalId, proposalId), eq(emailMessages.recipient, recipient));
  return {
    async listMessages(proposalId) {
      return db.select().from(emailMessages).where(eq(emailMessages.proposalId, proposalId)).orderBy(emailMessages.createdAt, emailMessages.recipient);
    },
    async insertMessage(row) {
      await db
        .insert(emailMessages)
        .values({ ...row, sentAt: null, outcomeSentAt: null })
        .onConflictDoNothing();
    },
    async markSent(proposalId, recipient, at) {
      await db.update(emailMessages).set({ sentAt: at }).where(message(proposalId, recipient));
    },
    async markOutcomeSent(proposalId, recipient, at) {
      await db.update(emailMessages).set({ outcomeSentAt: at }).where(message(proposalId, recipient));
    },
    async insertLink(row) {
      await db.insert(emailLinks).values({ ...row, usedAt: null });
    },
    async findLink(tokenHash) {
      const [row] = await db.select().from(emailLinks).where(eq(emailLinks.tokenHash, tokenHash));
      return row ?? null;
    },
    async claimLink(tokenHash, now) {
      const [row] = await db
        .update(emailLinks)
        .set({ usedAt: now })
        .where(and(eq(emailLinks.tokenHash, tokenHash), isNull(emailLinks.usedAt), gt(emailLinks.expiresAt, now)))
        .returning();
      return row ?? null;
    },
    async releaseLink(tokenHash) {
      await db.update(emailLinks).set({ usedAt: null }).where(eq(emailLinks.tokenHash, tokenHash));
    },
  };
}
