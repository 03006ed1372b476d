import { and, asc, desc, eq, gt, isNotNull, isNull, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import { auditHash, continuationProblem, genesisHash, type AuditCheckpoint, type UnsignedCheckpoint } from '../core/audit-chain.js';
import type { AuditEventInput, AuditEventRecord, ChainedAuditEvent } from '../core/model.js';
import type { AuditQuery } from '../core/ports.js';
import type { AuditLog, IntegratedBatch, StoredCheckpoint } from '../audit/ports.js';
import type { Db, Queryable } from './database.js';
import { auditCheckpoints, auditEvents } from './schema.js';

/**
 * The one module that writes the audit log. State changes insert rows here without waiting for
 * anyone; the integrator (one at a time, on the elected replica) places committed rows in the chain.
 */

/** Taken only by the integrator's transaction, never on a state change. */
const INTEGRATOR_LOCK_KEY = 0x61756469; // "audi"

const toRow = (event: AuditEventInput, at: Date) => ({
  at,
  type: event.type,
  actor: event.actor,
  proposalId: event.proposalId ?? null,
  agentId: event.agentId ?? null,
  data: event.data ?? {},
});

/**
 * Inserts audit rows inside the caller's transaction, so they commit or roll back with the change
 * they describe. No lock and no read: their place in the chain is assigned after commit.
 */
export async function appendAuditEvents(tx: Queryable, events: readonly AuditEventInput[], at: Date): Promise<void> {
  if (events.length > 0) await tx.insert(auditEvents).values(events.map((event) => toRow(event, at)));
}

/** The same insert as a CTE, for a transaction that sends its added rows in one statement (transactions.ts); with `onlyIf`, each row only if that condition holds. */
export function auditInsertCtes(events: ReadonlyArray<{ event: AuditEventInput; at: Date }>, onlyIf?: SQL): SQL[] {
  if (events.length === 0) return [];
  return [
    sql`audit_rows as (
      insert into audit_events (at, type, actor, proposal_id, agent_id, data)
      select at, type, actor, proposal_id, agent_id, data
      from jsonb_to_recordset(${auditRowsJson(events)}::jsonb) as r(at timestamptz, type text, actor text, proposal_id text, agent_id text, data jsonb)
      ${onlyIf ? sql`where ${onlyIf}` : sql``}
      returning 1)`,
  ];
}

/** The one parameter of `auditInsertCtes`: the rows as JSON. */
export function auditRowsJson(events: ReadonlyArray<{ event: AuditEventInput; at: Date }>): string {
  return JSON.stringify(
    events.map(({ event, at }) => ({
      at: at.toISOString(),
      type: event.type,
      actor: event.actor,
      proposal_id: event.proposalId ?? null,
      agent_id: event.agentId ?? null,
      data: event.data ?? {},
    })),
  );
}

export const appendAuditEvent = (tx: Queryable, event: AuditEventInput, at: Date): Promise<void> => appendAuditEvents(tx, [event], at);

/**
 * One change and its audit row as one statement (a data-modifying CTE each): atomic without a
 * transaction, so a single round trip instead of BEGIN, two statements and COMMIT.
 */
export function withAuditRow(change: SQLWrapper, event: AuditEventInput | undefined, at: Date): SQL {
  // The query's own SQL: embedded as a wrapper, drizzle would put it in parentheses, as a subquery.
  const statement = change.getSQL();
  if (!event) return statement;
  return sql`with change as (${statement}), ${sql.join(auditInsertCtes([{ event, at }]), sql`, `)} select 1`;
}

export function createAuditLog(db: Db): AuditLog {
  return {
    async list(query: AuditQuery): Promise<AuditEventRecord[]> {
      if (query.afterSeq !== undefined) {
        return db
          .select()
          .from(auditEvents)
          .where(and(gt(auditEvents.seq, query.afterSeq), query.proposalId ? eq(auditEvents.proposalId, query.proposalId) : undefined))
          .orderBy(asc(auditEvents.seq))
          .limit(query.limit ?? 1000);
      }
      return db
        .select()
        .from(auditEvents)
        .where(query.proposalId ? eq(auditEvents.proposalId, query.proposalId) : undefined)
        .orderBy(asc(auditEvents.id))
        .limit(query.limit ?? 1000);
    },

    async pendingCount(): Promise<number> {
      const [row] = await db
        .select({ count: sql<number>`count(*)::int` })
        .from(auditEvents)
        .where(isNull(auditEvents.seq));
      return Number(row?.count ?? 0);
    },

    /** Cheap enough to ask every tick: one index probe on the partial index of unplaced rows. */
    async hasPending(): Promise<boolean> {
      const rows = await db.select({ id: auditEvents.id }).from(auditEvents).where(isNull(auditEvents.seq)).limit(1);
      return rows.length > 0;
    },

    /**
     * Places up to `limit` committed rows at the end of the chain, in insert order among those
     * visible now, and records a signed checkpoint of the new head in the same transaction.
     *
     * Order is assigned here, not at insert: a row whose transaction commits late (a smaller id
     * than rows already placed) is simply placed in a later batch. Nothing is skipped, because a
     * batch takes every unplaced row it can see rather than "ids after the last one placed".
     *
     * With `floor` (the newest checkpoint signed so far), nothing is placed or signed unless the
     * chain still continues it: a table whose newest rows were deleted, or whose signed rows were
     * rewritten, gets no checkpoint of its own, which would contradict the published ones.
     */
    async integrate(
      limit: number,
      sign: (checkpoint: UnsignedCheckpoint) => AuditCheckpoint,
      now: Date,
      floor?: Pick<AuditCheckpoint, 'size' | 'head' | 'timestamp'> | null,
    ): Promise<IntegratedBatch> {
      return db.transaction(async (tx) => {
        // Two integrators at once (a deposed leader still finishing a batch) would fork the chain;
        // this lock and the unique index on seq make the second wait, then continue the first's head.
        await tx.execute(sql`select pg_advisory_xact_lock(${INTEGRATOR_LOCK_KEY})`);
        const [head] = await tx
          .select({ seq: auditEvents.seq, hash: auditEvents.hash })
          .from(auditEvents)
          .where(isNotNull(auditEvents.seq))
          .orderBy(desc(auditEvents.seq))
          .limit(1);
        const pending = await tx.select().from(auditEvents).where(isNull(auditEvents.seq)).orderBy(asc(auditEvents.id)).limit(limit);
        if (pending.length === 0) return { rows: 0, checkpoint: null };
        if (floor) {
          const [signedRow] = await tx.select({ hash: auditEvents.hash }).from(auditEvents).where(eq(auditEvents.seq, floor.size)).limit(1);
          const hashAtSignedSize = signedRow?.hash ?? null;
          const problem = continuationProblem(
            floor,
            head && head.seq !== null && head.hash !== null ? { seq: head.seq, hash: head.hash } : null,
            hashAtSignedSize,
          );
          if (problem) return { rows: 0, checkpoint: null, conflict: { ...problem, found: { size: head?.seq ?? 0, hashAtSignedSize } } };
        }
        const from = head?.seq ?? 0;
        let previous = head?.hash ?? genesisHash;
        const placed = pending.map((row, index) => {
          const hash = auditHash({ ...row, prevHash: previous });
          const entry = { id: row.id, seq: from + index + 1, prev_hash: previous, hash };
          previous = hash;
          return entry;
        });
        await tx.execute(sql`
          update audit_events as a set seq = v.seq, prev_hash = v.prev_hash, hash = v.hash
          from jsonb_to_recordset(${JSON.stringify(placed)}::jsonb) as v(id bigint, seq bigint, prev_hash text, hash text)
          where a.id = v.id`);
        const checkpoint = sign({
          origin: 'twokey-audit-checkpoint/v1',
          size: from + placed.length,
          from,
          head: previous,
          hashes: placed.map((entry) => entry.hash),
          timestamp: now.toISOString(),
          keyId: '',
        });
        await tx.insert(auditCheckpoints).values({ size: checkpoint.size, record: JSON.stringify(checkpoint), createdAt: now });
        return { rows: placed.length, checkpoint };
      });
    },

    /** The newest checkpoint still kept here (some sink lacks it), or null. */
    async newestStoredCheckpoint(): Promise<AuditCheckpoint | null> {
      const [row] = await db.select({ record: auditCheckpoints.record }).from(auditCheckpoints).orderBy(desc(auditCheckpoints.size)).limit(1);
      return row ? (JSON.parse(row.record) as AuditCheckpoint) : null;
    },

    /** Checkpoints some sink still lacks, oldest first. */
    async unpublished(sinks: readonly string[], limit: number): Promise<StoredCheckpoint[]> {
      if (sinks.length === 0) return [];
      const rows = await db
        .select()
        .from(auditCheckpoints)
        .where(sql`not (${auditCheckpoints.publishedTo} @> ${`{${sinks.join(',')}}`}::text[])`)
        .orderBy(asc(auditCheckpoints.size))
        .limit(limit);
      return rows.map((row) => ({ size: row.size, checkpoint: JSON.parse(row.record) as AuditCheckpoint, publishedTo: row.publishedTo }));
    },

    /** Marks a checkpoint as held by a sink; one that every sink holds is no longer kept. */
    async markPublished(size: number, sink: string, sinks: readonly string[]): Promise<void> {
      const all = `{${sinks.join(',')}}`;
      // One statement: delete it if this sink was the last one missing, else record the sink.
      await db.execute(sql`
        with gone as (
          delete from audit_checkpoints
          where size = ${size} and array_append(published_to, ${sink}::text) @> ${all}::text[]
          returning size)
        update audit_checkpoints set published_to = array_append(published_to, ${sink}::text)
        where size = ${size} and not (${sink} = any(published_to)) and not exists (select 1 from gone)`);
    },

    /** The chain in `seq` order, page by page. */
    async *chain(pageSize = 1000): AsyncGenerator<ChainedAuditEvent> {
      let afterSeq = 0;
      for (;;) {
        const page = (await this.list({ afterSeq, limit: pageSize })) as ChainedAuditEvent[];
        yield* page;
        const last = page.at(-1);
        if (!last || page.length < pageSize) return;
        afterSeq = last.seq;
      }
    },
  };
}
