import { and, asc, desc, eq, gt, inArray, isNotNull, isNull, lt, or, sql } from 'drizzle-orm';
import type { GrantApprovalRecord, GrantFilter, GrantRecord, GrantTransaction, GrantWithApprovals } from '../core/grants.js';
import type { Db, Queryable } from './database.js';
import { grantApprovals, grants } from './schema.js';

type GrantRow = typeof grants.$inferSelect;

const toGrant = (row: GrantRow): GrantRecord => ({ ...row });

/** A grant that can still cover a proposal at `now`, in SQL (the same rule as isUsable). */
const usableAt = (now: Date) =>
  and(isNotNull(grants.activatedAt), isNull(grants.revokedAt), gt(grants.expiresAt, now), or(isNull(grants.maxUses), lt(grants.uses, grants.maxUses)));

async function withApprovals(db: Queryable, rows: GrantRow[]): Promise<GrantWithApprovals[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((row) => row.id);
  const approvals = await db.select().from(grantApprovals).where(inArray(grantApprovals.grantId, ids)).orderBy(asc(grantApprovals.at));
  return rows.map((row) => ({ grant: toGrant(row), approvals: approvals.filter((a) => a.grantId === row.id) }));
}

/** Grant data access inside the caller's transaction (see GrantTransaction for the guarantees). */
export function grantTransactionStore(tx: Queryable): GrantTransaction {
  return {
    async listUsable(agentId, operation, now) {
      const rows = await tx
        .select()
        .from(grants)
        .where(and(eq(grants.agentId, agentId), eq(grants.operation, operation), usableAt(now)))
        .orderBy(asc(grants.expiresAt))
        .limit(20);
      return withApprovals(tx, rows);
    },
    async spendUse(id, now) {
      // The row lock this update takes makes a concurrent spender wait, then re-check the WHERE on
      // the row it committed: with `uses: 5`, exactly five updates match.
      const [row] = await tx
        .update(grants)
        .set({ uses: sql`${grants.uses} + 1` })
        .where(and(eq(grants.id, id), usableAt(now)))
        .returning();
      return row ? toGrant(row) : null;
    },
    async lock(id) {
      const [row] = await tx.select().from(grants).where(eq(grants.id, id)).for('update');
      return row ? toGrant(row) : null;
    },
    async findForProposal(proposalId, terms) {
      const [row] = await tx
        .select()
        .from(grants)
        .where(
          and(
            eq(grants.sourceProposalId, proposalId),
            isNull(grants.revokedAt),
            eq(grants.durationMs, terms.durationMs),
            terms.maxUses === null ? isNull(grants.maxUses) : eq(grants.maxUses, terms.maxUses),
            terms.bounded ? sql`jsonb_array_length(${grants.bounds}) > 0` : sql`jsonb_array_length(${grants.bounds}) = 0`,
          ),
        )
        .orderBy(asc(grants.createdAt))
        .limit(1)
        .for('update');
      return row ? toGrant(row) : null;
    },
    async insert(grant) {
      const [row] = await tx.insert(grants).values(grant).returning();
      if (!row) throw new Error(`grant ${grant.id} was not inserted`);
      return toGrant(row);
    },
    async addApproval(approval) {
      const inserted = await tx.insert(grantApprovals).values(approval).onConflictDoNothing().returning({ at: grantApprovals.at });
      return inserted.length === 1;
    },
    async listApprovals(grantId): Promise<GrantApprovalRecord[]> {
      return tx.select().from(grantApprovals).where(eq(grantApprovals.grantId, grantId)).orderBy(asc(grantApprovals.at));
    },
    async update(id, patch) {
      const [row] = await tx.update(grants).set(patch).where(eq(grants.id, id)).returning();
      if (!row) throw new Error(`grant ${id} vanished inside its transaction`);
      return toGrant(row);
    },
  };
}

/** Reads outside a transaction: the CLI's and the console's lists. */
export function createGrantReader(db: Db) {
  return {
    async list(filter: GrantFilter): Promise<GrantWithApprovals[]> {
      const rows = await db
        .select()
        .from(grants)
        .where(
          and(
            filter.agentId ? eq(grants.agentId, filter.agentId) : undefined,
            filter.operation ? eq(grants.operation, filter.operation) : undefined,
            filter.activeAt ? and(isNull(grants.revokedAt), gt(grants.expiresAt, filter.activeAt)) : undefined,
          ),
        )
        .orderBy(desc(grants.createdAt))
        .limit(filter.limit ?? 100);
      return withApprovals(db, rows);
    },
    async get(id: string): Promise<GrantWithApprovals | null> {
      const [row] = await db.select().from(grants).where(eq(grants.id, id));
      return row ? ((await withApprovals(db, [row]))[0] ?? null) : null;
    },
  };
}

export type GrantReader = ReturnType<typeof createGrantReader>;
