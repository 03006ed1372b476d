import { and, asc, desc, eq, gt, isNull, lte, ne, sql } from 'drizzle-orm';
import type { AgentRecord, ApprovalRecord, ConfirmationType, CommitMode, ProposalRecord, ProposalStatus } from '../core/model.js';
import type { AuditQuery, ProposalFilter, Store, StoreTransaction } from '../core/ports.js';
import { createAuditLog } from './audit-log.js';
import { AGENT_CHANNEL } from './channels.js';
import type { Db, Queryable } from './database.js';
import { grantTransactionStore } from './grants-store.js';
import type { Notifier } from './notifier.js';
import type { JobTaker } from '../outbox/ports.js';
import { agents, approvals, proposals, requestIdentities } from './schema.js';
import { lockedThenRead, onConnectionOf } from './on-connection.js';
import { addedRowsCommit, inTransaction, type WriteBuffer } from './transactions.js';

export { AGENT_CHANNEL, JOBS_CHANNEL, jobsNotice, PROPOSAL_CHANNEL, parseJobsNotice } from './channels.js';

export interface StoreOptions {
  /** Names this replica in job notices. */
  replica?: string;
  /**
   * After a transaction that queued jobs commits: the kinds it queued, due now, or due in `inMs`
   * (one call per job due later, with its ordering key; the outbox sets a wake-up for those due
   * before its next poll).
   */
  onJobsQueued?(kinds: readonly string[], inMs?: number, key?: string | null): void;
  /** Wakes the other replicas after commit (PostgreSQL); without it, only this process hears of changes. */
  notifier?: Notifier | undefined;
  /**
   * A slot of this process's outbox for a job the statement claims (one first of its ordering key,
   * inserted claimed; the twin a result's edit would join), run here once committed
   * (src/outbox/README.md, "Taken as queued"); null or absent: queued as any job.
   */
  takeJob?: JobTaker;
}

type ProposalRow = typeof proposals.$inferSelect;
type AgentRow = typeof agents.$inferSelect;

export const toProposal = (row: ProposalRow): ProposalRecord => ({
  ...row,
  status: row.status as ProposalStatus,
  confirmationType: row.confirmationType as ConfirmationType,
  commitMode: row.commitMode as CommitMode,
});

export const toAgent = (row: AgentRow): AgentRecord => ({ ...row, operations: row.operations ?? null });

interface ApprovalJson {
  approver: string;
  matchedRule: string;
  via: string;
  at: string;
}

/** A proposal's approvals, oldest first, as one JSON column of the statement that reads the proposal. */
export const approvalsColumn = sql<ApprovalJson[] | string>`coalesce((
  select json_agg(json_build_object('approver', a.approver, 'matchedRule', a.matched_rule, 'via', a.via, 'at', a.at) order by a.at)
  from approvals a where a.proposal_id = ${proposals.id}), '[]'::json)`;

/**
 * A request identity maps to this proposal and its agent has not been answered with the final outcome
 * yet (src/core/request-identity.ts): read with the proposal, so the agent's read needs no statement
 * more unless there is something to mark.
 */
export const unseenRequestColumn = sql<boolean>`exists (
  select 1 from request_identities r where r.proposal_id = ${proposals.id} and r.seen_at is null)`;

/** PGlite hands json back parsed, postgres.js as text when drizzle asks for raw values. */
export function toApprovals(proposalId: string, value: ApprovalJson[] | string): ApprovalRecord[] {
  const list = typeof value === 'string' ? (JSON.parse(value) as ApprovalJson[]) : value;
  return list.map((approval) => ({ proposalId, approver: approval.approver, matchedRule: approval.matchedRule, via: approval.via, at: new Date(approval.at) }));
}

function readsFrom(db: Queryable) {
  return {
    /** The proposal and its approvals in one statement. */
    async getProposalWithApprovals(id: string) {
      const [row] = await db
        .select({ proposal: proposals, approvals: approvalsColumn, unseenRequest: unseenRequestColumn })
        .from(proposals)
        .where(eq(proposals.id, id));
      return row ? { proposal: toProposal(row.proposal), approvals: toApprovals(id, row.approvals), unseenRequest: row.unseenRequest } : null;
    },
    async getAgent(id: string) {
      const [row] = await db.select().from(agents).where(eq(agents.id, id));
      return row ? toAgent(row) : null;
    },
    async listApprovals(proposalId: string): Promise<ApprovalRecord[]> {
      return db.select().from(approvals).where(eq(approvals.proposalId, proposalId)).orderBy(asc(approvals.at));
    },
  };
}

export { appendAuditEvent } from './audit-log.js';

/**
 * A transaction's store. The writes that only add rows — a new proposal, audit events, outbox jobs —
 * go to `writes` and are sent before commit as one statement (data-modifying CTEs), instead of one
 * round trip each; the change notifications are kept for after the commit.
 */
function transactionStore(tx: Queryable, hot: HotStatements, writes: WriteBuffer): StoreTransaction {
  return {
    ...readsFrom(tx),
    grants: grantTransactionStore(tx),
    async lockAgentAndCountWaiting(agentId, now, atMost) {
      // Sent together, in this order (see `lockedThenRead`): the count starts once the lock is held.
      const [, [row]] = await lockedThenRead(
        onConnectionOf(tx, hot.lockAgent).execute({ agentId }),
        onConnectionOf(tx, hot.countWaiting).execute({ agentId, now: now.toISOString(), atMost }),
      );
      return Number(row?.count ?? 0);
    },
    async countRecentProposals(agentId, operation, since, exceptId) {
      // A placeholder in a condition reaches the driver as given (only inserted values go through their
      // column's mapping): a time as text, which both drivers read as a timestamptz.
      const [row] = await onConnectionOf(tx, hot.countRecent).execute({ agentId, operation, since: since.toISOString(), exceptId });
      return Number(row?.count ?? 0);
    },
    async lockProposal(id) {
      const [row] = await onConnectionOf(tx, hot.lockProposal).execute({ id });
      return row ? toProposal(row) : null;
    },
    async lockProposalWithContext(id) {
      // The approvals are not read in the locking statement: one that waited for the lock still
      // reads with the snapshot it started with, and would miss the approvals the lock holder just
      // committed. A statement of its own, started once the lock is held, sees them.
      const [[row], listed] = await lockedThenRead(
        onConnectionOf(tx, hot.lockProposalWithAgent).execute({ id }),
        onConnectionOf(tx, hot.approvalsOf).execute({ id }),
      );
      if (!row) return null;
      return { proposal: toProposal(row.proposal), agent: row.agent ? toAgent(row.agent) : null, approvals: listed, unseenRequest: row.unseenRequest };
    },
    insertProposal: writes.insertProposal,
    updateProposal: writes.updateProposal,
    async updateExecutingProposal(id, patch) {
      // An update that waited for the row lock checks its condition again on the row its holder left.
      const executing = and(eq(proposals.id, id), eq(proposals.status, 'executing'), isNull(proposals.consumedAt));
      const [row] = await tx.update(proposals).set(patch).where(executing).returning();
      return row ? toProposal(row) : null;
    },
    addApproval: writes.addApproval,
    async insertAgent(agent) {
      await tx.insert(agents).values(agent);
    },
    async revokeAgent(id, at) {
      const revoked = tx.update(agents).set({ revokedAt: at }).where(eq(agents.id, id)).returning({ id: agents.id });
      await tx.execute(sql`with revoked as (${revoked.getSQL()}) select pg_notify(${AGENT_CHANNEL}, id) from revoked`);
    },
    appendAudit: writes.appendAudit,
    enqueue: writes.enqueue,
    notifyChange: writes.notifyChange,
    finishExecutingProposal: writes.finishExecutingProposal,
    completeJob: writes.completeJob,
    async begin() {
      // Open already: the store that defers the transaction answers this one.
    },
  };
}

/**
 * The statements inside the state changes of every cycle (propose, decide, commit), built once per
 * store: drizzle only fills in their parameters, where building each again cost a share of every
 * request's CPU. What stays built per call has a shape that changes with the call: a proposal's update
 * (which columns a transition sets) and the buffered audit rows and jobs (one statement, as many
 * parts as there are rows).
 */
function hotStatements(db: Db) {
  const id = sql.placeholder('id');
  const agentId = sql.placeholder('agentId');
  const waiting = db
    .select({ one: sql`1` })
    .from(proposals)
    .where(and(eq(proposals.agentId, agentId), eq(proposals.status, 'pending'), gt(proposals.expiresAt, sql.placeholder('now'))))
    .limit(sql.placeholder('atMost'))
    .as('waiting');
  return {
    lockAgent: db.select({ id: agents.id }).from(agents).where(eq(agents.id, agentId)).for('update').prepare('twokey_lock_agent'),
    countWaiting: db
      .select({ count: sql<number>`count(*)::int` })
      .from(waiting)
      .prepare('twokey_count_waiting'),
    countRecent: db
      .select({ count: sql<number>`count(*)::int` })
      .from(proposals)
      .where(
        and(
          eq(proposals.agentId, agentId),
          eq(proposals.operation, sql.placeholder('operation')),
          gt(proposals.createdAt, sql.placeholder('since')),
          ne(proposals.id, sql.placeholder('exceptId')),
        ),
      )
      .prepare('twokey_count_recent'),
    lockProposal: db.select().from(proposals).where(eq(proposals.id, id)).for('update').prepare('twokey_lock_proposal'),
    // Whether a request identity waits for its agent's final answer is read here, not with the
    // approvals: identities are written with the proposal and marked seen only once it is final,
    // which a proposal still to be decided or executed is not, so a snapshot taken before the lock
    // wait reads the same.
    lockProposalWithAgent: db
      .select({ proposal: proposals, agent: agents, unseenRequest: unseenRequestColumn })
      .from(proposals)
      .leftJoin(agents, eq(agents.id, proposals.agentId))
      .where(eq(proposals.id, id))
      .for('update', { of: proposals })
      .prepare('twokey_lock_proposal_with_agent'),
    approvalsOf: db.select().from(approvals).where(eq(approvals.proposalId, id)).orderBy(asc(approvals.at)).prepare('twokey_approvals_of'),
  };
}

type HotStatements = ReturnType<typeof hotStatements>;

/**
 * The reads every request or cycle makes, built once: drizzle then only fills in the parameters
 * instead of assembling the query on each call (a fifth of a busy server's CPU went there).
 */
function preparedReads(db: Db) {
  return {
    agentByKeyHash: db
      .select()
      .from(agents)
      .where(eq(agents.keyHash, sql.placeholder('keyHash')))
      .prepare('twokey_agent_by_key_hash'),
    agentById: db
      .select()
      .from(agents)
      .where(eq(agents.id, sql.placeholder('id')))
      .prepare('twokey_agent_by_id'),
    proposal: db
      .select()
      .from(proposals)
      .where(eq(proposals.id, sql.placeholder('id')))
      .prepare('twokey_proposal'),
    proposalWithApprovals: db
      .select({ proposal: proposals, approvals: approvalsColumn, unseenRequest: unseenRequestColumn })
      .from(proposals)
      .where(eq(proposals.id, sql.placeholder('id')))
      .prepare('twokey_proposal_with_approvals'),
  };
}

export function createStore(db: Db, options: StoreOptions = {}): Store {
  const auditLog = createAuditLog(db);
  const replica = options.replica ?? '';
  const prepared = preparedReads(db);
  const hot = hotStatements(db);
  // Transactions made only of added rows, from concurrent requests, share statements under load.
  const commitAddedRows = addedRowsCommit(db);
  return {
    ...readsFrom(db),
    async getAgent(id) {
      const [row] = await prepared.agentById.execute({ id });
      return row ? toAgent(row) : null;
    },
    async getProposalWithApprovals(id) {
      const [row] = await prepared.proposalWithApprovals.execute({ id });
      return row ? { proposal: toProposal(row.proposal), approvals: toApprovals(id, row.approvals), unseenRequest: row.unseenRequest } : null;
    },
    async markRequestSeen(proposalId: string, at: Date): Promise<void> {
      await db
        .update(requestIdentities)
        .set({ seenAt: at })
        .where(and(eq(requestIdentities.proposalId, proposalId), isNull(requestIdentities.seenAt)));
    },
    async transaction(work) {
      const { value, dueKinds, dueLater, notifications } = await inTransaction(
        db,
        replica,
        (tx, writes) => transactionStore(tx, hot, writes),
        work,
        commitAddedRows,
        options.takeJob,
      );
      if (dueKinds.length > 0) options.onJobsQueued?.(dueKinds);
      for (const { kind, inMs, key } of dueLater) options.onJobsQueued?.([kind], inMs, key);
      // Only after commit, never for a rolled-back change; not awaited (the notifier's close waits for it).
      if (options.notifier && notifications.length > 0) void options.notifier.send(notifications);
      return value;
    },
    async getProposal(id) {
      const [row] = await prepared.proposal.execute({ id });
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
      const [row] = await prepared.agentByKeyHash.execute({ keyHash });
      return row ? toAgent(row) : null;
    },
    async listAgents() {
      return (await db.select().from(agents).orderBy(asc(agents.createdAt))).map(toAgent);
    },
    listAudit: (query: AuditQuery) => auditLog.list(query),
    async countProposalsByStatus() {
      const rows = await db
        .select({ status: proposals.status, count: sql<number>`count(*)::int` })
        .from(proposals)
        .groupBy(proposals.status);
      return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
    },
    probeWrite: singleFlight(async () => {
      // Other replicas' rows a day old are gone with the same statement: the table is as small as the fleet.
      await db.execute(sql`
        with forgotten as (delete from readiness_probes where replica <> ${replica} and probed_at < now() - interval '1 day' returning 1)
        insert into readiness_probes (replica, probed_at) values (${replica}, now())
        on conflict (replica) do update set probed_at = excluded.probed_at`);
    }),
  };
}

/** Callers that arrive while `work` runs share its outcome: a burst of probes costs one write. */
function singleFlight(work: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  return () =>
    (running ??= work().finally(() => {
      running = null;
    }));
}
