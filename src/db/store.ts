import { and, asc, desc, eq, gt, lte, sql } from 'drizzle-orm';
import { auditHash, genesisHash } from '../core/audit-chain.js';
import type {
  AgentRecord,
  ApprovalRecord,
  AuditEventInput,
  AuditEventRecord,
  ConfirmationType,
  CommitMode,
  ProposalRecord,
  ProposalStatus,
} from '../core/model.js';
import type { AuditQuery, OutboxJobSpec, ProposalFilter, Store, StoreTransaction } from '../core/ports.js';
import type { Db } from './database.js';
import { agents, approvals, auditEvents, jobs, proposals } from './schema.js';

/** The channel every replica LISTENs on to wake long-polls. */
export const PROPOSAL_CHANNEL = 'twokey_proposals';

const DEFAULT_MAX_ATTEMPTS = 25;

/** Serialises appends so each audit row can link to the one before it. */
const AUDIT_CHAIN_LOCK_KEY = 0x61756474; // "audt"

type ProposalRow = typeof proposals.$inferSelect;
type AgentRow = typeof agents.$inferSelect;
type AuditRow = typeof auditEvents.$inferSelect;

export const toProposal = (row: ProposalRow): ProposalRecord => ({
  ...row,
  status: row.status as ProposalStatus,
  confirmationType: row.confirmationType as ConfirmationType,
  commitMode: row.commitMode as CommitMode,
});

const toAgent = (row: AgentRow): AgentRecord => ({ ...row, operations: row.operations ?? null });

const toAudit = (row: AuditRow): AuditEventRecord => ({ ...row });

export type Executor = Pick<Db, 'select' | 'insert' | 'update' | 'execute'>;

function readsFrom(db: Executor) {
  return {
    async getAgent(id: string) {
      const [row] = await db.select().from(agents).where(eq(agents.id, id));
      return row ? toAgent(row) : null;
    },
    async listApprovals(proposalId: string): Promise<ApprovalRecord[]> {
      return db.select().from(approvals).where(eq(approvals.proposalId, proposalId)).orderBy(asc(approvals.at));
    },
  };
}

/**
 * Appends one row to the hash-chained audit log, inside the caller's transaction so it commits or
 * rolls back with the change it describes. The one place the chain is written. Returns the new
 * row's hash: pass it back as `chainHead` for the next append in the same transaction, which then
 * already holds the chain lock and knows its predecessor.
 */
export async function appendAuditEvent(tx: Executor, event: AuditEventInput, at: Date, chainHead?: string): Promise<string> {
  let prevHash = chainHead;
  if (prevHash === undefined) {
    // Held until commit: the next writer reads this row as its predecessor only once it is visible.
    await tx.execute(sql`select pg_advisory_xact_lock(${AUDIT_CHAIN_LOCK_KEY})`);
    const [last] = await tx.select({ hash: auditEvents.hash }).from(auditEvents).orderBy(desc(auditEvents.seq)).limit(1);
    prevHash = last?.hash ?? genesisHash;
  }
  const row = {
    at,
    type: event.type,
    actor: event.actor,
    proposalId: event.proposalId ?? null,
    agentId: event.agentId ?? null,
    data: event.data ?? {},
    prevHash,
  };
  const hash = auditHash(row);
  await tx.insert(auditEvents).values({ ...row, hash });
  return hash;
}

function transactionStore(tx: Executor): StoreTransaction {
  let chainHead: string | undefined;
  return {
    ...readsFrom(tx),
    async lockProposal(id) {
      const [row] = await tx.select().from(proposals).where(eq(proposals.id, id)).for('update');
      return row ? toProposal(row) : null;
    },
    async insertProposal(proposal) {
      const [row] = await tx.insert(proposals).values(proposal).returning();
      if (!row) throw new Error(`proposal ${proposal.id} was not inserted`);
      return toProposal(row);
    },
    async updateProposal(id, patch) {
      const [row] = await tx.update(proposals).set(patch).where(eq(proposals.id, id)).returning();
      if (!row) throw new Error(`proposal ${id} vanished inside its transaction`);
      return toProposal(row);
    },
    async insertApproval(approval) {
      const inserted = await tx.insert(approvals).values(approval).onConflictDoNothing().returning({ at: approvals.at });
      return inserted.length === 1;
    },
    async insertAgent(agent) {
      await tx.insert(agents).values(agent);
    },
    async revokeAgent(id, at) {
      await tx.update(agents).set({ revokedAt: at }).where(eq(agents.id, id));
    },
    async appendAudit(event, at) {
      chainHead = await appendAuditEvent(tx, event, at, chainHead);
    },
    async enqueue(specs, at) {
      const toRow = (spec: OutboxJobSpec) => ({
        kind: spec.kind,
        payload: spec.payload,
        orderingKey: spec.orderingKey ?? null,
        status: 'queued',
        maxAttempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        runAt: at,
        createdAt: at,
        updatedAt: at,
      });
      const plain = specs.filter((spec) => !(spec.coalesce && spec.orderingKey));
      if (plain.length > 0) await tx.insert(jobs).values(plain.map(toRow));
      for (const spec of specs) {
        if (!(spec.coalesce && spec.orderingKey)) continue;
        const row = toRow(spec);
        const time = sql`${at.toISOString()}::timestamptz`;
        // FOR UPDATE closes the race with a worker claiming the waiting job right now: this waits
        // for the claim to commit, then sees the job running and queues a new one after it.
        await tx.execute(sql`
          insert into jobs (kind, payload, ordering_key, status, max_attempts, run_at, created_at, updated_at)
          select ${row.kind}, ${JSON.stringify(row.payload)}::jsonb, ${row.orderingKey}, 'queued', ${row.maxAttempts}, ${time}, ${time}, ${time}
          where not exists (
            select 1 from jobs
            where ordering_key = ${row.orderingKey} and kind = ${row.kind} and status = 'queued'
            for update)`);
      }
    },
    async notifyChange(proposalId) {
      // Delivered by PostgreSQL only when the transaction commits, never for a rolled-back change.
      await tx.execute(sql`select pg_notify(${PROPOSAL_CHANNEL}, ${proposalId})`);
    },
  };
}

export function createStore(db: Db): Store {
  return {
    ...readsFrom(db),
    transaction(work) {
      return db.transaction((tx) => work(transactionStore(tx)));
    },
    async getProposal(id) {
      const [row] = await db.select().from(proposals).where(eq(proposals.id, id));
      return row ? toProposal(row) : null;
    },
    async listProposals(filter: ProposalFilter) {
      const conditions = [
        filter.status ? eq(proposals.status, filter.status) : undefined,
        filter.agentId ? eq(proposals.agentId, filter.agentId) : undefined,
        filter.operation ? eq(proposals.operation, filter.operation) : undefined,
      ];
      const rows = await db
        .select()
        .from(proposals)
        .where(and(...conditions))
        .orderBy(desc(proposals.createdAt))
        .limit(filter.limit ?? 100);
      return rows.map(toProposal);
    },
    async listExpiredPending(now, limit) {
      const rows = await db
        .select()
        .from(proposals)
        .where(and(eq(proposals.status, 'pending'), lte(proposals.expiresAt, now)))
        .orderBy(asc(proposals.expiresAt))
        .limit(limit);
      return rows.map(toProposal);
    },
    async listStaleExecutions(now, limit) {
      const rows = await db
        .select()
        .from(proposals)
        .where(and(eq(proposals.status, 'executing'), lte(proposals.leaseUntil, now)))
        .orderBy(asc(proposals.leaseUntil))
        .limit(limit);
      return rows.map(toProposal);
    },
    async findAgentByName(name) {
      const [row] = await db.select().from(agents).where(eq(agents.name, name));
      return row ? toAgent(row) : null;
    },
    async findAgentByKeyHash(keyHash) {
      const [row] = await db.select().from(agents).where(eq(agents.keyHash, keyHash));
      return row ? toAgent(row) : null;
    },
    async listAgents() {
      return (await db.select().from(agents).orderBy(asc(agents.createdAt))).map(toAgent);
    },
    async listAudit(query: AuditQuery) {
      const rows = await db
        .select()
        .from(auditEvents)
        .where(
          and(
            query.afterSeq !== undefined ? gt(auditEvents.seq, query.afterSeq) : undefined,
            query.proposalId ? eq(auditEvents.proposalId, query.proposalId) : undefined,
          ),
        )
        .orderBy(asc(auditEvents.seq))
        .limit(query.limit ?? 1000);
      return rows.map(toAudit);
    },
    async countProposalsByStatus() {
      const rows = await db.select({ status: proposals.status, count: sql<number>`count(*)::int` }).from(proposals).groupBy(proposals.status);
      return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
  };
}
