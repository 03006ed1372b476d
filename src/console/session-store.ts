import { and, eq, gt, isNull } from 'drizzle-orm';
import type { AuditEventInput } from '../core/model.js';
import type { Db } from '../db/database.js';
import { approverLinks, consoleSessions } from '../db/schema.js';
import { appendAuditEvent } from '../db/store.js';

export type ApproverLinkRow = typeof approverLinks.$inferSelect;
export type ConsoleSessionRow = typeof consoleSessions.$inferSelect;

/** The writes of one sign-in step, all inside one transaction together with their audit event. */
export interface SessionTransaction {
  insertLink(row: Omit<ApproverLinkRow, 'usedAt'>): Promise<void>;
  /** Marks an unused, unexpired link used; null when it was not (the caller finds out why). */
  useLink(tokenHash: string, now: Date): Promise<ApproverLinkRow | null>;
  insertSession(row: Omit<ConsoleSessionRow, 'revokedAt'>): Promise<void>;
  revokeSession(idHash: string, now: Date): Promise<boolean>;
  /** Revokes every live session of this approver; returns how many. */
  revokeSessionsOf(approver: string, now: Date): Promise<number>;
  /** Ends the unused links of this approver (they expire now); returns how many. */
  expireLinksOf(approver: string, now: Date): Promise<number>;
  appendAudit(event: AuditEventInput, at: Date): Promise<void>;
}

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
export function createConsoleSessionStore(db: Db) {
  return {
    transaction<T>(work: (tx: SessionTransaction) => Promise<T>): Promise<T> {
      return db.transaction((tx) => work(sessionTransaction(tx)));
    },
    async getLink(tokenHash: string): Promise<ApproverLinkRow | null> {
      const [row] = await db.select().from(approverLinks).where(eq(approverLinks.tokenHash, tokenHash));
      return row ?? null;
    },
    async getSession(idHash: string): Promise<ConsoleSessionRow | null> {
      const [row] = await db.select().from(consoleSessions).where(eq(consoleSessions.idHash, idHash));
      return row ?? null;
    },
  };
}

export type ConsoleSessionStore = ReturnType<typeof createConsoleSessionStore>;
