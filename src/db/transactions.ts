import { and, eq, isNull, sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type postgres from 'postgres';
import type { JobClaim, JobCompletion } from '../core/jobs.js';
import type { ApprovalRecord, AuditEventInput, ProposalPatch, ProposalRecord } from '../core/model.js';
import { NoLongerExecutingError, type StoreTransaction } from '../core/ports.js';
import { auditInsertCtes, auditRowsJson } from './audit-log.js';
import { JOBS_CHANNEL, jobsNotice, PROPOSAL_CHANNEL } from './channels.js';
import type { Db, Queryable } from './database.js';
import { createGroupCommit } from '../lib/group-commit.js';
import { jobCompletionCte } from './jobs-store.js';
import { rowsInsertCte, rowsJson } from './row-inserts.js';
import { approvals, proposals } from './schema.js';
import { rowsOf } from './rows.js';
import type { JobTaker } from '../outbox/ports.js';
import { insertedClaimed, jobInsertCte, sendTakingJobs, startTaken, takenColumn, takeSlots, type QueuedJob } from './job-inserts.js';

// How the store's transactions reach the database (see README.md, "How a state change reaches
// PostgreSQL"): writes that only add rows are buffered and sent as one statement, and a transaction
// begins only when its work first needs one.

/** Wake-ups for other replicas: a channel and its payload. */
export type Notification = readonly [channel: string, payload: string];

/**
 * Rows a transaction only adds: a new proposal, audit rows, outbox jobs. Kept as rows, not yet one
 * statement, so that the rows of transactions made of nothing else can share one (`addedRowsCommit`).
 */
export interface AddedRows {
  inserted: ProposalRecord[];
  audit: Array<{ event: AuditEventInput; at: Date }>;
  queued: QueuedJob[];
}

/**
 * What a transaction buffered: the rows it adds, its changes to rows it holds locked (and the result
 * it records), which go out as one statement (`bufferedStatement`), and the proposals whose change
 * other replicas hear of once it has committed.
 */
interface BufferedWrites {
  rows: AddedRows;
  /**
   * The writes that need the transaction's row locks (a locked proposal's update, an approval), as
   * the statement's CTEs. Never part of a batch of added rows: a transaction with a lock has begun.
   */
  locked: SQL[];
  /** The result the statement records, if any: it then reads back whether its update matched (`matched`). */
  finishing: { id: string; update: SQL } | null;
  /** The running job this transaction completes (`completeJob`), and who waits for the completion's answer. */
  completion: JobCompletionWrite | null;
  changed: string[];
}

/** A job completed by a transaction's statement: told how it went once the transaction committed, or why it did not. */
interface JobCompletionWrite {
  job: JobClaim;
  at: Date;
  resolve(completion: JobCompletion): void;
  reject(error: unknown): void;
}

/** What a committed transaction wakes: the job kinds it queued to run now, those due later, and other replicas. */
export interface WakeUps {
  dueKinds: string[];
  /** Jobs queued to run later (a delayed chat edit, a reminder): their kinds and how long until they are due. */
  dueLater: DueLater[];
  notifications: Notification[];
}

export interface DueLater {
  kind: string;
  inMs: number;
  /** Its ordering key: a lane forgets the wake-up when this process claims the job sooner (a twin taken over). */
  key: string | null;
}

const dialect = new PgDialect();

/** A statement as its text and parameters, rendered already (see `rowsWithoutJobsQuery`). */
interface RenderedStatement {
  text: string;
  params: unknown[];
}

const isRendered = (statement: SQL | RenderedStatement): statement is RenderedStatement => 'text' in statement;

/** Its text and parameters: rendered by drizzle now, unless it was already. */
function rendered(statement: SQL | RenderedStatement): RenderedStatement {
  if (isRendered(statement)) return statement;
  const query = dialect.sqlToQuery(statement);
  return { text: query.sql, params: query.params };
}

/** For drizzle to run: a rendered statement as its text in raw chunks between its parameters, which drizzle renders by copying them. */
function asSql(statement: SQL | RenderedStatement): SQL {
  if (!isRendered(statement)) return statement;
  const parts = statement.text.split(/\$\d+\b/);
  const chunks: SQL[] = [sql.raw(parts[0]!)];
  statement.params.forEach((param, index) => chunks.push(sql`${param}`, sql.raw(parts[index + 1]!)));
  return sql.join(chunks);
}

/**
 * On PostgreSQL, hands `statement` to the transaction's connection now and answers its result
 * later. postgres.js writes everything a connection was handed before the event loop's next turn
 * in one packet (up to 16 KiB: patches/postgres+3.4.9.patch; unpatched, a statement over 1 KiB went
 * out alone at once), so the statement and the COMMIT that postgres.js sends once the transaction's
 * work returns go out, and come back, together. Null on PGlite, which has no connection to share.
 */
function sendBeforeCommit(tx: Queryable, statement: SQL | RenderedStatement): Promise<unknown> | null {
  const client = (tx as Partial<Pick<Db, '_'>>)._?.session as { client?: Partial<Pick<postgres.TransactionSql, 'unsafe'>> } | undefined;
  if (typeof client?.client?.unsafe !== 'function') return null;
  const { text, params } = rendered(statement);
  // `execute()` queues it on the connection at once, ahead of the COMMIT that follows.
  const sent = client.client.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true }).execute();
  // Observed from the start: when it fails, the transaction fails first, and its failure is read after.
  sent.catch(() => undefined);
  return sent;
}

/** The writes of a transaction that only add rows, kept until it ends (`take`). */
export type WriteBuffer = Pick<
  StoreTransaction,
  'insertProposal' | 'updateProposal' | 'addApproval' | 'appendAudit' | 'enqueue' | 'notifyChange' | 'finishExecutingProposal' | 'completeJob'
> & {
  /** Takes what was buffered: the rows and result of its one statement, and the proposals it changed. */
  take(): BufferedWrites;
};

/**
 * The wake-ups of the jobs a committed transaction queued. `inserted`, when the statement read it
 * back, says which of them went in: a coalescing job that found one of its kind already queued
 * added nothing, and waking a lane for it would cost a claim that finds nothing due (the queued one
 * has its own wake-up, here or on the replica that queued it).
 */
function wakeUpsOf(replica: string, { rows, changed }: Pick<BufferedWrites, 'rows' | 'changed'>, inserted?: readonly boolean[]): WakeUps {
  // A job inserted claimed runs here once committed: no lane needs waking for it, here or elsewhere.
  // (A twin taken over in a job's place is left out by `inserted`: that job was not inserted.)
  const queued = (inserted ? rows.queued.filter((_, index) => inserted[index] !== false) : rows.queued).filter((job) => !insertedClaimed(job));
  const dueKinds = [...new Set(queued.filter(({ spec, at }) => !spec.runAt || spec.runAt <= at).map(({ spec }) => spec.kind))];
  const dueLater = queued.flatMap(({ spec, at }) => {
    const inMs = spec.runAt ? spec.runAt.getTime() - at.getTime() : 0;
    return inMs > 0 ? [{ kind: spec.kind, inMs, key: spec.orderingKey ?? null }] : [];
  });
  const notifications: Notification[] = changed.map((id) => [PROPOSAL_CHANNEL, id] as const);
  if (dueKinds.length > 0) notifications.push([JOBS_CHANNEL, jobsNotice(replica, dueKinds)]);
  return { dueKinds, dueLater, notifications };
}

function writeBuffer(db: Db): WriteBuffer {
  const inserted: ProposalRecord[] = [];
  // One update per proposal: two updates of one row in one statement would leave only one's effect.
  const updates = new Map<string, ProposalPatch>();
  const approved: ApprovalRecord[] = [];
  let finishing: { id: string; update: SQL } | null = null;
  let completion: JobCompletionWrite | null = null;
  const audit: Array<{ event: AuditEventInput; at: Date }> = [];
  const queued: QueuedJob[] = [];
  const notify = new Set<string>();
  return {
    async insertProposal(proposal) {
      // Only added, never read again in its transaction: it goes out with the buffered rows.
      inserted.push(proposal);
      return proposal;
    },
    updateProposal(locked, patch) {
      const merged = { ...updates.get(locked.id), ...patch };
      updates.set(locked.id, merged);
      // The row as the update that goes out leaves it, whichever of its earlier versions the caller holds.
      return { ...locked, ...merged };
    },
    addApproval(approval) {
      approved.push({ ...approval, stepUp: approval.stepUp ?? null });
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
    finishExecutingProposal(id, executionAttempts, patch) {
      if (finishing) throw new Error('one proposal result per transaction');
      const claimed = and(
        eq(proposals.id, id),
        eq(proposals.status, 'executing'),
        isNull(proposals.consumedAt),
        eq(proposals.executionAttempts, executionAttempts),
      );
      // Only rendered here, never run by itself: it becomes the first part of the buffered statement.
      finishing = { id, update: db.update(proposals).set(patch).where(claimed).returning({ id: proposals.id }).getSQL() };
    },
    completeJob(job, at) {
      if (completion) throw new Error('one job completion per transaction');
      const answer = new Promise<JobCompletion>((resolve, reject) => (completion = { job, at, resolve, reject }));
      // Nobody may be waiting for it when the transaction fails: that failure is the transaction's own.
      answer.catch(() => undefined);
      return answer;
    },
    take() {
      const rows: AddedRows = { inserted: [...inserted], audit: [...audit], queued: [...queued] };
      const finished = finishing;
      finishing = null;
      const completed = completion;
      completion = null;
      const locked = [
        // Rendered per call: which columns a transition sets differs from one to the next.
        ...[...updates].map(
          ([id, patch], index) =>
            sql`${sql.raw(`updated_${index}`)} as (${db.update(proposals).set(patch).where(eq(proposals.id, id)).returning({ id: proposals.id }).getSQL()})`,
        ),
        ...(approved.length > 0 ? [rowsInsertCte(approvals, 'new_approvals', approved)] : []),
      ];
      updates.clear();
      approved.length = 0;
      inserted.length = 0;
      audit.length = 0;
      queued.length = 0;
      const changed = [...notify];
      notify.clear();
      return { rows, locked, finishing: finished, completion: completed, changed };
    },
  };
}

/** The rows' data-modifying CTEs, each added only if `onlyIf` holds. */
function addedRowsCtes(rows: AddedRows, onlyIf?: SQL): SQL[] {
  return [
    ...(rows.inserted.length > 0 ? [rowsInsertCte(proposals, 'new_proposals', rows.inserted, onlyIf)] : []),
    ...auditInsertCtes(rows.audit, onlyIf),
    ...rows.queued.map((job, index) => jobInsertCte(job, index, onlyIf)),
  ];
}

/** The one statement that sends what a transaction buffered; null for nothing. */
function bufferedStatement({
  rows,
  locked,
  finishing,
  completion,
}: Pick<BufferedWrites, 'rows' | 'locked' | 'finishing' | 'completion'>): SQL | RenderedStatement | null {
  if (finishing) {
    // Its writes are conditioned on the result's update; a locked row's would have to be too.
    if (locked.length > 0 || completion) throw new Error('a transaction that records a result by its conditional update writes no locked row');
    return finishingStatement(finishing.update, rows);
  }
  if (locked.length === 0 && !completion) return hasRows(rows) ? addedRowsStatement(rows) : null;
  if (!completion) return sql`with ${sql.join([...locked, ...addedRowsCtes(rows)], sql`, `)} select ${takenColumn(rows.queued) ?? sql`1`}`;
  // Reads back whether the claim still held (a job re-claimed elsewhere after its lease ran out is
  // left to that worker, as any fenced completion), and whether a job of its key waits behind it.
  const taken = takenColumn(rows.queued);
  return sql`with ${sql.join([...locked, ...addedRowsCtes(rows), jobCompletionCte(completion.job, completion.at)], sql`, `)}
    select exists (select 1 from completed_job) as held, exists (select 1 from completed_job where followed) as followed${taken ? sql`, ${taken}` : sql``}`;
}

/** What the statement that completed a job read back (postgres.js answers rows, PGlite `{ rows }`). */
function jobCompletionResult(result: unknown): JobCompletion {
  const [row] = rowsOf<{ held?: unknown; followed?: unknown }>(result);
  return { held: row?.held === true, followed: row?.followed === true };
}

const hasRows = (rows: AddedRows): boolean => rows.inserted.length + rows.audit.length + rows.queued.length > 0;

/**
 * The one statement that adds the rows, whether a transaction sends it alone or before its COMMIT:
 * without jobs, the text kept for its shape (`rowsWithoutJobsQuery`); with jobs, built now.
 */
function addedRowsStatement(rows: AddedRows): SQL | RenderedStatement {
  return rows.queued.length === 0 ? rowsWithoutJobsQuery(rows) : builtAddedRows(rows);
}

/** The statement of added rows, built by drizzle from its CTEs. */
function builtAddedRows(rows: AddedRows): SQL {
  return sql`with ${sql.join(addedRowsCtes(rows), sql`, `)} select ${takenColumn(rows.queued) ?? sql`1`}`;
}

/** The text of each shape of `rowsWithoutJobsQuery` (new proposals or not, audit rows or not). */
const rowsWithoutJobsTexts = new Map<string, string>();

/**
 * The statement of added rows without jobs (a proposal a rule decided, a read-only upstream call's
 * record, every batch of the group commit) as its text and parameters: one of three texts, each
 * rendered by drizzle the first time its shape comes. After that only its parameters (the rows as
 * JSON) are made per call: on the fast path, building the same statement again cost more than its
 * rows did. Jobs keep a statement built per call: each is a CTE of its own, their number and kinds
 * vary.
 */
function rowsWithoutJobsQuery(rows: AddedRows): RenderedStatement {
  const params = [...(rows.inserted.length > 0 ? [rowsJson(proposals, rows.inserted)] : []), ...(rows.audit.length > 0 ? [auditRowsJson(rows.audit)] : [])];
  const shape = `${rows.inserted.length > 0 ? 'proposals' : ''}+${rows.audit.length > 0 ? 'audit' : ''}`;
  let text = rowsWithoutJobsTexts.get(shape);
  if (text === undefined) {
    const rendered = dialect.sqlToQuery(builtAddedRows(rows));
    // Its parameters must be exactly the rows, in order: anything else would be bound wrongly.
    if (rendered.params.length !== params.length || rendered.params.some((param, index) => param !== params[index])) {
      throw new Error(`the statement of added rows (${shape}) has parameters other than its rows`);
    }
    text = rendered.sql;
    rowsWithoutJobsTexts.set(shape, text);
  }
  return { text, params };
}

/**
 * A result recorded by a conditional update, with every row added only if it matched; reads back
 * whether it did (`matched`), and which of its jobs went in (`inserted`, see `wakeUpsOf`).
 */
function finishingStatement(update: SQL, rows: AddedRows): SQL {
  const parts = [sql`finished_execution as (${update})`, ...addedRowsCtes(rows, sql`exists (select 1 from finished_execution)`)];
  const jobCounts = rows.queued.map((_, index) => sql.raw(`(select count(*) from job_${index})`));
  const inserted = jobCounts.length > 0 ? sql`array[${sql.join(jobCounts, sql`, `)}]::int[]` : sql`'{}'::int[]`;
  const taken = takenColumn(rows.queued);
  return sql`with ${sql.join(parts, sql`, `)} select (select count(*)::int from finished_execution) as matched, ${inserted} as inserted${taken ? sql`, ${taken}` : sql``}`;
}

/** The rows of several transactions as one's, in the order they came; never their jobs (see addedRowsCommit). */
function joinAddedRows(batch: readonly AddedRows[]): AddedRows {
  // Thrown before anything is sent, so the group commit sends each transaction alone: none is lost.
  if (batch.some((rows) => rows.queued.length > 0)) throw new Error('a batch of added rows never carries jobs');
  return { inserted: batch.flatMap((rows) => rows.inserted), audit: batch.flatMap((rows) => rows.audit), queued: [] };
}

/** Rows committed by one statement of their own. */
async function commitAlone(db: Db, rows: AddedRows): Promise<void> {
  if (hasRows(rows)) await db.execute(asSql(addedRowsStatement(rows)));
}

/** The most transactions' rows one statement carries. */
const ADDED_ROWS_BATCH = 32;

/**
 * Group commit of transactions made only of added rows (a read-only upstream call's record, a
 * remote call's claim, a proposal a rule decided): those that end while one such statement is on
 * its way to the database go together in the next (`src/lib/group-commit.ts`). A lone transaction's
 * statement goes at once, the same statement as without it; under load one round trip (one socket
 * write, one parse and plan, one commit flush) commits many. A batch the database refused is sent
 * again one transaction at a time, so only the faulty one fails; one whose connection broke before
 * the answer fails every transaction in it, as a lone statement would have.
 *
 * Only proposals and audit rows are joined: their CTEs carry all their rows in one parameter, so a
 * batch's statement has one of four texts, each prepared once per connection. A transaction that
 * queues jobs goes in a statement of its own, as before: each job is a CTE of its own (those that
 * coalesce check the queue first, and jobs sharing an ordering key must go in in order), so joined
 * batches would make a new statement text, and a new prepared statement on every connection, for
 * each mix of jobs.
 */
export function addedRowsCommit(db: Db): (rows: AddedRows) => Promise<void> {
  const run = (rows: AddedRows) => commitAlone(db, rows);
  const grouped = createGroupCommit<AddedRows, void>({
    maxBatch: ADDED_ROWS_BATCH,
    runOne: run,
    async runBatch(batch) {
      await run(joinAddedRows(batch));
      return batch.map(() => undefined);
    },
  });
  return (rows) => (rows.queued.length > 0 ? run(rows) : grouped(rows));
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
    updateProposal: writes.updateProposal,
    updateExecutingProposal: inside('updateExecutingProposal'),
    addApproval: writes.addApproval,
    listApprovals: inside('listApprovals'),
    getAgent: inside('getAgent'),
    insertAgent: inside('insertAgent'),
    revokeAgent: inside('revokeAgent'),
    appendAudit: writes.appendAudit,
    enqueue: writes.enqueue,
    notifyChange: writes.notifyChange,
    finishExecutingProposal: writes.finishExecutingProposal,
    completeJob: writes.completeJob,
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

/** The store of an open transaction, given drizzle's transaction and the buffer its added rows go to. */
export type TransactionStoreFactory = (tx: Queryable, writes: WriteBuffer) => StoreTransaction;

/** A transaction opened midway through its work: its store, and how to end it once the work is done. */
interface OpenTransaction {
  store: StoreTransaction;
  /** Commits (no error) or rolls back; `committed` then settles. */
  end(error?: unknown): void;
  /** Once committed: the job kinds it queued to run now (or shortly) and the wake-ups to send. */
  committed: Promise<WakeUps>;
}

/**
 * Opens a transaction whose work runs outside the callback drizzle gives it: the callback waits
 * until `end` is called, then sends what was buffered (on PostgreSQL in the packet of the COMMIT:
 * if it fails, the transaction is already aborted, PostgreSQL answers the COMMIT with a rollback,
 * and its own error is thrown, after the fact, as if it had come first).
 */
function openTransaction(
  db: Db,
  replica: string,
  storeOn: TransactionStoreFactory,
  writes: WriteBuffer,
  takeJob: JobTaker | undefined,
): Promise<OpenTransaction> {
  return new Promise((opened, failedToOpen) => {
    let beforeCommit: Promise<unknown> | null = null;
    let begun = false;
    let completion: JobCompletionWrite | null = null;
    let queued: QueuedJob[] = [];
    let statementResult: unknown;
    const committed = db
      .transaction(async (tx) => {
        begun = true;
        await new Promise<void>((done, failed) => {
          opened({ store: storeOn(tx, writes), end: (error) => (error === undefined ? done() : failed(error)), committed });
        });
        const buffered = writes.take();
        ({ completion } = buffered);
        // A result's jobs go in only if its update matched: none is inserted claimed, a twin may be taken.
        takeSlots(buffered.rows.queued, takeJob, { conditional: buffered.finishing !== null });
        queued = buffered.rows.queued;
        const statement = bufferedStatement(buffered);
        if (buffered.finishing && statement) {
          // Whether its update matched decides whether this transaction commits: read before COMMIT.
          statementResult = await tx.execute(asSql(statement));
          const finished = finishingResult(statementResult);
          if (!finished.matched) throw new NoLongerExecutingError(buffered.finishing.id);
          return wakeUpsOf(replica, buffered, finished.inserted);
        }
        if (statement) {
          beforeCommit = sendBeforeCommit(tx, statement);
          if (!beforeCommit) statementResult = await tx.execute(asSql(statement));
        }
        return wakeUpsOf(replica, buffered);
      })
      .finally(async () => {
        // Its own error says what failed, rather than the COMMIT that PostgreSQL answered with a rollback.
        if (beforeCommit) statementResult = await beforeCommit;
      });
    // A job the transaction completed is done only once it committed; one it inserted claimed runs only then.
    committed.then(
      () => {
        completion?.resolve(jobCompletionResult(statementResult));
        startTaken(queued, statementResult);
      },
      (error: unknown) => {
        completion?.reject(error);
        startTaken(queued, undefined);
      },
    );
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
export async function inTransaction<T>(
  db: Db,
  replica: string,
  storeOn: TransactionStoreFactory,
  work: (tx: StoreTransaction) => Promise<T>,
  /** Commits the rows of a transaction that only added rows (the store's `addedRowsCommit`). */
  commitAddedRows: (rows: AddedRows) => Promise<void>,
  /** Slots of this process's outbox for the jobs its statement may claim (`takeSlots`); none: every job is queued. */
  takeJob?: JobTaker,
): Promise<{ value: T } & WakeUps> {
  const writes = writeBuffer(db);
  // Set by the work's first statement; a holder, as the work sets it in a closure.
  const begun: { transaction: Promise<OpenTransaction> | null } = { transaction: null };
  const open = () => (begun.transaction ??= openTransaction(db, replica, storeOn, writes, takeJob));
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
    return { value, ...(await transaction.committed) };
  }
  const buffered = writes.take();
  const { rows, finishing } = buffered;
  // A lock is a statement that begins the transaction: work that never began one holds no lock.
  if (buffered.locked.length > 0) throw new Error('a locked row was written in a transaction that never began, so took no lock');
  if (buffered.completion) throw new Error('a job is completed only by a transaction that began (a decision, under its lock)');
  if (finishing) {
    const statement = () => db.execute(finishingStatement(finishing.update, rows));
    const finished = finishingResult(await sendTakingJobs(statement, rows.queued, takeJob, { conditional: true }));
    // Its inserts were conditioned on the update: nothing was written.
    if (!finished.matched) throw new NoLongerExecutingError(finishing.id);
    return { value, ...wakeUpsOf(replica, buffered, finished.inserted) };
  }
  if (rows.queued.length > 0) {
    // Jobs make a statement of its own (never joined with others'), which reads back the ids of
    // those inserted claimed.
    await sendTakingJobs(() => db.execute(builtAddedRows(rows)), rows.queued, takeJob);
  } else if (hasRows(rows)) {
    // Rendered once, by whichever statement carries them (alone or joined with others').
    await commitAddedRows(rows);
  }
  return { value, ...wakeUpsOf(replica, buffered) };
}

/**
 * What a statement that records a result reads back (postgres.js answers rows, PGlite `{ rows }`):
 * whether its update matched, and which of its jobs went in.
 */
function finishingResult(result: unknown): { matched: boolean; inserted: boolean[] } {
  const [row] = rowsOf<{ matched?: unknown; inserted?: unknown }>(result);
  const counts = Array.isArray(row?.inserted) ? row.inserted : [];
  return { matched: Number(row?.matched ?? 0) > 0, inserted: counts.map((count) => Number(count) > 0) };
}
