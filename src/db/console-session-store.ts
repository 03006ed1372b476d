import { and, eq, gt, isNull } from 'drizzle-orm';
import type { ConsoleSessionStore, SessionTransaction } from '../console/ports.js';
import type { Db } from './database.js';
import { approverLinks, consoleSessions } from './schema.js';
import { appendAuditEvent } from './store.js';

function sessionTransaction(tx: Db): SessionTransaction {
  return {
    async insertLink(row) {
      await tx.insert(approverLinks).values({ ...row, usedAt: null });
    },
    async useLink(tokenHash, now) {
      // One conditional UPDATE: two tabs opening the same link race here and exactly one wins.
      const [row] = await tx
        .update(approverLinks)
        .set({ usedAt: now })
        .where(and(eq(approverLinks.tokenHash, tokenHash), isNull(approverLinks.usedAt), gt(approverLinks.expiresAt, now)))
        .returning();
      return row ?? null;
    },
    async insertSession(row) {
      await tx.insert(consoleSessions).values({ ...row, revokedAt: null });
    },
    async revokeSession(idHash, now) {
      const rows = await tx
        .update(consoleSessions)
        .set({ revokedAt: now })
        .where(and(eq(consoleSessions.idHash, idHash), isNull(consoleSessions.revokedAt)))
        .returning({ idHash: consoleSessions.idHash });
      return rows.length === 1;
    },
    async revokeSessionsOf(approver, now) {
      const rows = await tx
        .update(consoleSessions)
        .set({ revokedAt: now })
        .where(and(eq(consoleSessions.approver, approver), isNull(consoleSessions.revokedAt), gt(consoleSessions.expiresAt, now)))
        .returning({ idHash: consoleSessions.idHash });
      return rows.length;
    },
    async expireLinksOf(approver, now) {
      const rows = await tx
        .update(approverLinks)
        .set({ expiresAt: now })
        .where(and(eq(approverLinks.approver, approver), isNull(approverLinks.usedAt), gt(approverLinks.expiresAt, now)))
        .returning({ tokenHash: approverLinks.tokenHash });
      return rows.length;
    },
    // The store's one chain writer, on this transaction: the sign-in change and its audit row commit together.
    async appendAudit(event, at) {
      await appendAuditEvent(tx, event, at);
    },
  };
}

/** Data access for console sign-in links and sessions (tables approver_links, console_sessions). */
export function createConsoleSessionStore(db: Db): ConsoleSessionStore {
  return {
    transaction<T>(work: (tx: SessionTransaction) => Promise<T>): Promise<T> {
      return db.transaction((tx) => work(sessionTransaction(tx)));
    },
    async getLink(tokenHash) {
      const [row] = await db.select().from(approverLinks).where(eq(approverLinks.tokenHash, tokenHash));
      return row ?? null;
    },
    async getSession(idHash) {
      const [row] = await db.select().from(consoleSessions).where(eq(consoleSessions.idHash, idHash));
      return row ?? null;
    },
  };
}
