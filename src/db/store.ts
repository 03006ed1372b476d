import { and, asc, desc, eq, getTableColumns, gt, isNull, lte, ne, Param, sql, type Column, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type postgres from 'postgres';
import type { AgentRecord, ApprovalRecord, AuditEventInput, ConfirmationType, CommitMode, ProposalRecord, ProposalStatus } from '../core/model.js';
import type { AuditQuery, OutboxJobSpec, ProposalFilter, Store, StoreTransaction } from '../core/ports.js';
import { auditInsertCtes, createAuditLog } from './audit-log.js';
import { rowsInsertCte } from './row-inserts.js';
import type { Db, Queryable } from './database.js';
import { grantTransactionStore } from './grants-store.js';
import type { Notifier } from './notifier.js';
import { agents, approvals, proposals, requestIdentities } from './schema.js';

/** The channel every replica LISTENs on to wake long-polls. */
export const PROPOSAL_CHANNEL = 'twokey_proposals';

/**
 * The channel that says which job kinds a replica just queued, so every replica's outbox claims
 * for those lanes only. Payload: `<replica>|<kind>,<kind>`; a replica ignores its own notices (it
 * woke its outbox at commit already).
 */
export const JOBS_CHANNEL = 'twokey_jobs';

/**
 * The channel of revoked agents (payload: the agent id), so every replica's key cache (src/core/agents.ts)
 * forgets a revoked key. Sent inside the revocation's own transaction, unlike the wake-ups: a revocation
 * is rare, and PostgreSQL then delivers it if and only if the revocation commits, to every replica
 * listening at that moment.
 */
export const AGENT_CHANNEL = 'twokey_agents';

export function parseJobsNotice(payload: string): { replica: string; kinds: string[] } {
  const bar = payload.indexOf('|');
  return {
    replica: payload.slice(0, Math.max(0, bar)),
    kinds: payload
      .slice(bar + 1)
      .split(',')
      .filter(Boolean),
  };
}

export interface StoreOptions {
  /** Names this replica in job notices. */
  replica?: string;
  /** After a transaction that queued jobs due now commits: the kinds it queued. */
  onJobsQueued?(kinds: readonly string[]): void;
  /** Wakes the other replicas after commit (PostgreSQL); without it, only this process hears of changes. */
  notifier?: Notifier | undefined;
}

const DEFAULT_MAX_ATTEMPTS = 25;

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
 * A row lock and a read that must see what the lock's previous holder committed, sent together.
 * A transaction's statements run one after another on its connection, and under READ COMMITTED
 * each takes its snapshot when it starts, so the read still starts only once the lock is held;
 * sending both at once (postgres.js writes them in one packet) saves a round trip. Order matters:
 * both go through the same drizzle path, which hands them to the driver in the order they are
 * awaited here (PGlite runs them one after the other anyway).
 */
async function lockedThenRead<L, R>(lock: PromiseLike<L>, read: PromiseLike<R>): Promise<[L, R]> {
  return Promise.all([lock, read]);
}

/** Wake-ups for other replicas: a channel and its payload. */
type Notification = readonly [channel: string, payload: string];

/**
 * What a transaction buffered: one statement that adds its rows, the job kinds it queued to run
 * now, and the notifications to send once it has committed.
 */
interface BufferedWrites {
  statement: SQL | null;
  dueKinds: string[];
  notifications: Notification[];
}

const dialect = new PgDialect();

/**
 * On PostgreSQL, hands `statement` to the transaction's connection now and answers its result
 * later. postgres.js writes everything a connection was handed before the event loop's next turn
 * in one packet, so the statement and the COMMIT that postgres.js sends once the transaction's
 * work returns go out, and come back, together. Null on PGlite, which has no connection to share.
 */
function sendBeforeCommit(tx: Queryable, statement: SQL): Promise<unknown> | null {
  const client = (tx as Partial<Pick<Db, '_'>>)._?.session as { client?: Partial<Pick<postgres.TransactionSql, 'unsafe'>> } | undefined;
  if (typeof client?.client?.unsafe !== 'function') return null;
  const query = dialect.sqlToQuery(statement);
  // `execute()` queues it on the connection at once, ahead of the COMMIT that follows.
  const sent = client.client.unsafe(query.sql, query.params as postgres.ParameterOrJSON<never>[], { prepare: true }).execute();
  // Observed from the start: when it fails, the transaction fails first, and its failure is read after.
  sent.catch(() => undefined);
  return sent;
}

/** The writes of a transaction that only add rows, kept until it ends (see `transactionStore`). */
type WriteBuffer = Pick<StoreTransaction, 'insertProposal' | 'appendAudit' | 'enqueue' | 'notifyChange'> & {
  /** Takes what was buffered: one statement, the kinds of the jobs queued to run now (reminders wait), the wake-ups. */
  take(): BufferedWrites;
};

function writeBuffer(replica: string): WriteBuffer {
  const inserted: ProposalRecord[] = [];
  const audit: Array<{ event: AuditEventInput; at: Date }> = [];
  const queued: Array<{ spec: OutboxJobSpec; at: Date }> = [];
  const notify = new Set<string>();
  return {
    async insertProposal(proposal) {
      // Only added, never read again in its transaction: it goes out with the buffered rows.
      inserted.push(proposal);
      return proposal;
    },
    async appendAudit(event, at) {
      audit.push({ event, at });
    },
    async enqueue(specs, at) {
      for (const spec of specs) {
        // A coalescing job already queued by this transaction covers this change too (it acts on
        // the state it reads when it runs).
        const covered = spec.coalesce && queued.some((job) => job.spec.coalesce && job.spec.kind === spec.kind && job.spec.orderingKey === spec.orderingKey);
        if (!covered) queued.push({ spec, at });
      }
    },
    async notifyChange(proposalId) {
      notify.add(proposalId);
    },
    take() {
      const parts = [
        ...(inserted.length > 0 ? [rowsInsertCte(proposals, 'new_proposals', inserted)] : []),
        ...auditInsertCtes(audit),
        ...queued.map(({ spec, at }, index) => jobInsertCte(spec, at, index)),
      ];
      inserted.length = 0;
      const dueKinds = [...new Set(queued.filter(({ spec, at }) => !spec.runAt || spec.runAt <= at).map(({ spec }) => spec.kind))];
      audit.length = 0;
      queued.length = 0;
      const notifications: Notification[] = [...notify].map((id) => [PROPOSAL_CHANNEL, id] as const);
      if (dueKinds.length > 0) notifications.push([JOBS_CHANNEL, `${replica}|${dueKinds.join(',')}`]);
      notify.clear();
      return { statement: parts.length > 0 ? sql`with ${sql.join(parts, sql`, `)} select 1` : null, dueKinds, notifications };
    },
  };
}

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
      return { proposal: toProposal(row.proposal), agent: row.agent ? toAgent(row.agent) : null, approvals: listed };
    },
    insertProposal: writes.insertProposal,
    async updateProposal(id, patch) {
      // Which columns change differs from one transition to the next: built per call.
      const [row] = await tx.update(proposals).set(patch).where(eq(proposals.id, id)).returning();
      if (!row) throw new Error(`proposal ${id} vanished inside its transaction`);
      return toProposal(row);
    },
    async updateExecutingProposal(id, patch) {
      // An update that waited for the row lock checks its condition again on the row its holder left.
      const executing = and(eq(proposals.id, id), eq(proposals.status, 'executing'), isNull(proposals.consumedAt));
      const [row] = await tx.update(proposals).set(patch).where(executing).returning();
      return row ? toProposal(row) : null;
    },
    async insertApproval(approval) {
      const inserted = await onConnectionOf(tx, hot.insertApproval).execute({ ...approval, stepUp: approval.stepUp ?? null });
      return inserted.length === 1;
    },
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
    async begin() {
      // Open already: the store that defers the transaction answers this one.
    },
  };
}

/**
 * The store `work` sees: buffered writes go to `writes` at once; the first statement that must run
 * inside the transaction opens it (`open`), and everything after runs there. A transaction made of
 * buffered writes alone thus never sends BEGIN: its one statement commits by itself.
 */
function deferredStore(writes: WriteBuffer, open: () => Promise<StoreTransaction>): StoreTransaction {
  const inside =
    <K extends Exclude<keyof StoreTransaction, 'grants'>>(method: K) =>
    async (...args: Parameters<StoreTransaction[K]>): Promise<Awaited<ReturnType<StoreTransaction[K]>>> =>
      ((await open())[method] as (...a: Parameters<StoreTransaction[K]>) => Promise<Awaited<ReturnType<StoreTransaction[K]>>>)(...args);
  const grant =
    <K extends keyof StoreTransaction['grants']>(method: K) =>
    async (...args: Parameters<StoreTransaction['grants'][K]>): Promise<Awaited<ReturnType<StoreTransaction['grants'][K]>>> =>
      ((await open()).grants[method] as (...a: Parameters<StoreTransaction['grants'][K]>) => Promise<Awaited<ReturnType<StoreTransaction['grants'][K]>>>)(
        ...args,
      );
  return {
    lockProposal: inside('lockProposal'),
    lockProposalWithContext: inside('lockProposalWithContext'),
    insertProposal: writes.insertProposal,
    updateProposal: inside('updateProposal'),
    updateExecutingProposal: inside('updateExecutingProposal'),
    insertApproval: inside('insertApproval'),
    listApprovals: inside('listApprovals'),
    getAgent: inside('getAgent'),
    insertAgent: inside('insertAgent'),
    revokeAgent: inside('revokeAgent'),
    appendAudit: writes.appendAudit,
    enqueue: writes.enqueue,
    notifyChange: writes.notifyChange,
    lockAgentAndCountWaiting: inside('lockAgentAndCountWaiting'),
    countRecentProposals: inside('countRecentProposals'),
    async begin() {
      await open();
    },
    grants: {
      listUsable: grant('listUsable'),
      spendUse: grant('spendUse'),
      lock: grant('lock'),
      findForProposal: grant('findForProposal'),
      insert: grant('insert'),
      addApproval: grant('addApproval'),
      listApprovals: grant('listApprovals'),
      update: grant('update'),
    },
  };
}

/** A transaction opened midway through its work: its store, and how to end it once the work is done. */
interface OpenTransaction {
  store: StoreTransaction;
  /** Commits (no error) or rolls back; `committed` then settles. */
  end(error?: unknown): void;
  committed: Promise<void>;
}

/**
 * Opens a transaction whose work runs outside the callback drizzle gives it: the callback waits
 * until `end` is called, then sends what was buffered (on PostgreSQL in the packet of the COMMIT:
 * if it fails, the transaction is already aborted, PostgreSQL answers the COMMIT with a rollback,
 * and its own error is thrown, after the fact, as if it had come first).
 */
function openTransaction(db: Db, hot: HotStatements, writes: WriteBuffer, taken: (buffered: BufferedWrites) => void): Promise<OpenTransaction> {
  return new Promise((opened, failedToOpen) => {
    let beforeCommit: Promise<unknown> | null = null;
    let begun = false;
    const committed = db
      .transaction(async (tx) => {
        begun = true;
        await new Promise<void>((done, failed) => {
          opened({ store: transactionStore(tx, hot, writes), end: (error) => (error === undefined ? done() : failed(error)), committed });
        });
        const buffered = writes.take();
        taken(buffered);
        if (buffered.statement) {
          beforeCommit = sendBeforeCommit(tx, buffered.statement);
          if (!beforeCommit) await tx.execute(buffered.statement);
        }
      })
      .finally(async () => {
        // Its own error says what failed, rather than the COMMIT that PostgreSQL answered with a rollback.
        if (beforeCommit) await beforeCommit;
      });
    committed.catch((error: unknown) => {
      if (!begun) failedToOpen(error);
    });
  });
}

/**
 * Runs `work` as one transaction, begun only when the work first needs one: a statement that must
 * see or lock rows, or `begin()`. Work made only of buffered writes (a proposal a rule approved, a
 * remote claim) sends them as one statement with no BEGIN or COMMIT: a single statement is atomic
 * by itself, and saves the round trip BEGIN costs. On PGlite that statement waits, as a transaction
 * does, for any other transaction to end.
 */
async function inTransaction<T>(
  db: Db,
  hot: HotStatements,
  replica: string,
  work: (tx: StoreTransaction) => Promise<T>,
): Promise<{ value: T; dueKinds: string[]; notifications: Notification[] }> {
  const writes = writeBuffer(replica);
  // Set by the work's first statement; a holder, as the work sets it in a closure.
  const begun: { transaction: Promise<OpenTransaction> | null; buffered: BufferedWrites | null } = { transaction: null, buffered: null };
  const open = () => (begun.transaction ??= openTransaction(db, hot, writes, (taken) => (begun.buffered = taken)));
  let value: T;
  try {
    value = await work(deferredStore(writes, async () => (await open()).store));
  } catch (error) {
    const transaction = await begun.transaction?.catch(() => null);
    if (transaction) {
      transaction.end(error);
      await transaction.committed.catch(() => undefined);
    }
    throw error;
  }
  if (begun.transaction) {
    const transaction = await begun.transaction;
    transaction.end();
    await transaction.committed;
    const { dueKinds, notifications } = begun.buffered ?? { dueKinds: [], notifications: [] };
    return { value, dueKinds, notifications };
  }
  const { statement, dueKinds, notifications } = writes.take();
  if (statement) await db.execute(statement);
  return { value, dueKinds, notifications };
}

function jobInsertCte(spec: OutboxJobSpec, at: Date, index: number): SQL {
  const time = sql`${at.toISOString()}::timestamptz`;
  // Reminders and escalations are queued at propose time to run later.
  const runAt = sql`${(spec.runAt ?? at).toISOString()}::timestamptz`;
  const name = sql.raw(`job_${index}`);
  const values = sql`select ${spec.kind}, ${JSON.stringify(spec.payload)}::jsonb, ${spec.orderingKey ?? null}, 'queued', ${spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS}, ${runAt}, ${time}, ${time}`;
  if (!(spec.coalesce && spec.orderingKey)) {
    return sql`${name} as (insert into jobs (kind, payload, ordering_key, status, max_attempts, run_at, created_at, updated_at) ${values} returning 1)`;
  }
  // FOR UPDATE closes the race with a worker claiming the waiting job right now: this waits for the
  // claim to commit, then sees the job running and queues a new one after it.
  return sql`${name} as (
    insert into jobs (kind, payload, ordering_key, status, max_attempts, run_at, created_at, updated_at)
    ${values}
    where not exists (
      select 1 from jobs
      where ordering_key = ${spec.orderingKey} and kind = ${spec.kind} and status = 'queued'
      for update)
    returning 1)`;
}

/** A statement drizzle prepared on the database, as far as running it goes. */
interface Prepared<R> {
  execute(values?: Record<string, unknown>): Promise<R>;
}

/**
 * `statement`, prepared once on the database, run on the transaction's connection instead. drizzle
 * binds a prepared statement to the session it was built on, and a transaction's session differs only
 * by its client (the reserved connection on PostgreSQL, PGlite's transaction): the same statement
 * with that client in place of the pool's. Checked, not assumed: run on the pool, a `for update`
 * would hold its lock for no transaction at all.
 */
function onConnectionOf<R>(tx: Queryable, statement: Prepared<R>): Prepared<R> {
  const session = (tx as Partial<Pick<Db, '_'>>)._?.session as { client?: unknown } | undefined;
  if (!session?.client || !Object.hasOwn(statement, 'client')) {
    throw new Error("drizzle's transaction or prepared statement no longer has the shape the store relies on");
  }
  return Object.create(statement, { client: { value: session.client } }) as Prepared<R>;
}

/**
 * A row of placeholders, one per column. drizzle maps a placeholder's value through its column (a
 * date to text, json to text) even when it is null, where a plain insert leaves null alone: a null
 * json column would be stored as JSON `null`, a null date would throw. So null goes through as null.
 */
const placeholders = <T extends Record<string, Column>>(columns: T) =>
  Object.fromEntries(
    Object.entries(columns).map(([key, column]) => [
      key,
      sql`${new Param(sql.placeholder(key), { mapToDriverValue: (value: unknown) => (value === null ? null : column.mapToDriverValue(value)) })}`,
    ]),
  ) as { [K in keyof T]: SQL };

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
    lockProposalWithAgent: db
      .select({ proposal: proposals, agent: agents })
      .from(proposals)
      .leftJoin(agents, eq(agents.id, proposals.agentId))
      .where(eq(proposals.id, id))
      .for('update', { of: proposals })
      .prepare('twokey_lock_proposal_with_agent'),
    approvalsOf: db.select().from(approvals).where(eq(approvals.proposalId, id)).orderBy(asc(approvals.at)).prepare('twokey_approvals_of'),
    insertApproval: db
      .insert(approvals)
      .values(placeholders(getTableColumns(approvals)))
      .onConflictDoNothing()
      .returning({ at: approvals.at })
      .prepare('twokey_insert_approval'),
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
      const { value, dueKinds, notifications } = await inTransaction(db, hot, replica, work);
      if (dueKinds.length > 0) options.onJobsQueued?.(dueKinds);
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
