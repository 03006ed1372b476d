import { and, asc, eq, gt, isNull, lt, or, sql } from 'drizzle-orm';
import type { PasskeyRecord, PasskeyStore, PasskeyTransaction } from '../passkeys/ports.js';
import type { Db } from './database.js';
import { passkeyChallenges, passkeys } from './schema.js';
import { appendAuditEvent } from './store.js';

function passkeyTransaction(tx: Db): PasskeyTransaction {
  return {
    async insertChallenge(row) {
      await tx.insert(passkeyChallenges).values({ ...row, usedAt: null });
    },
    async useChallenge(nonce, owner, purpose, now) {
      // One conditional UPDATE: two posts of the same assertion race here and exactly one wins.
      const [row] = await tx
        .update(passkeyChallenges)
        .set({ usedAt: now })
        .where(
          and(
            eq(passkeyChallenges.nonce, nonce),
            eq(passkeyChallenges.owner, owner),
            eq(passkeyChallenges.purpose, purpose),
            isNull(passkeyChallenges.usedAt),
            gt(passkeyChallenges.expiresAt, now),
          ),
        )
        .returning();
      return row ?? null;
    },
    async insertPasskey(row) {
      const inserted = await tx
        .insert(passkeys)
        .values({ ...row, lastUsedAt: null, revokedAt: null })
        .onConflictDoNothing()
        .returning({ id: passkeys.credentialId });
      return inserted.length === 1;
    },
    async recordUse(credentialId, counter, now) {
      // Authenticators that keep no counter report 0 every time; one that does must move forward.
      const rows = await tx
        .update(passkeys)
        .set({ counter, lastUsedAt: now })
        .where(
          and(
            eq(passkeys.credentialId, credentialId),
            isNull(passkeys.revokedAt),
            or(lt(passkeys.counter, counter), and(eq(passkeys.counter, 0), sql`${counter} = 0`)),
          ),
        )
        .returning({ id: passkeys.credentialId });
      return rows.length === 1;
    },
    async revoke(credentialId, owner, now) {
      const [row] = await tx
        .update(passkeys)
        .set({ revokedAt: now })
        .where(and(eq(passkeys.credentialId, credentialId), eq(passkeys.owner, owner), isNull(passkeys.revokedAt)))
        .returning();
      return row ?? null;
    },
    async appendAudit(event, at) {
      await appendAuditEvent(tx, event, at);
    },
  };
}

/** Data access for passkeys and their challenges. */
export function createPasskeyStore(db: Db): PasskeyStore {
  return {
    transaction: (work) => db.transaction((tx) => work(passkeyTransaction(tx))),
    async get(credentialId) {
      const [row] = await db.select().from(passkeys).where(eq(passkeys.credentialId, credentialId));
      return (row as PasskeyRecord | undefined) ?? null;
    },
    listOf: (owner) => db.select().from(passkeys).where(eq(passkeys.owner, owner)).orderBy(asc(passkeys.createdAt)),
    async getChallenge(nonce) {
      const [row] = await db.select().from(passkeyChallenges).where(eq(passkeyChallenges.nonce, nonce));
      return row ?? null;
    },
  };
}
