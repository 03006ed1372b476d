import { and, eq, isNull, lte, or, sql, type SQL } from 'drizzle-orm';
import type { AgpTokenRecord, AgpTokenStore, OpenExecuteRecord, TokenEffects } from '../agp/ports.js';
import type { AuditEventInput } from '../core/model.js';
import type { IdempotencyClaim, IdempotencyRecord, IdempotencyStore } from '../idempotency/ports.js';
import { createGroupCommit } from '../lib/group-commit.js';
import type { Db, Queryable } from './database.js';
import { agpTokens, idempotencyKeys } from './schema.js';
import { auditInsertCtes, withAuditRow } from './audit-log.js';
import { rowsInsertCte } from './row-inserts.js';
import { rowsOf } from './rows.js';
import { appendAuditEvent } from './store.js';

type TokenRow = typeof agpTokens.$inferSelect;
type IdempotencyRow = typeof idempotencyKeys.$inferSelect;

const toToken = (row: TokenRow): AgpTokenRecord => ({ ...row, kind: row.kind as AgpTokenRecord['kind'], data: row.data ?? null });

const toIdempotency = (row: IdempotencyRow): IdempotencyRecord => ({ ...row, status: row.status as IdempotencyRecord['status'] });

/** Audit rows are written by the audit log's one writer, inside `tx`, with the change they describe. */
async function appendAudit(tx: Queryable, event: AuditEventInput | undefined, at: Date): Promise<void> {
  if (event) await appendAuditEvent(tx, event, at);
}

/** Every data-modifying CTE needs a RETURNING to be a CTE; nothing reads it. */
const returningNothing = { one: sql<number>`1` };

/**
 * An `open` execute's record as CTEs: the minted tokens (none is an empty JSON array: the text stays
 * the same, one named statement) and the audit row.
 */
const openExecuteCtes = (record: OpenExecuteRecord): SQL[] => [
  rowsInsertCte(agpTokens, 'minted_tokens', record.minted),
  ...auditInsertCtes([{ event: record.event, at: record.at }]),
];

const mergeData = (patch: Record<string, unknown>) => sql`coalesce(${agpTokens.data}, '{}'::jsonb) || ${JSON.stringify(patch)}::jsonb`;

export function createAgpTokenStore(db: Db): AgpTokenStore {
  return {
    async insert(record, effects: TokenEffects = {}) {
      const insert = db
        .insert(agpTokens)
        .values({ ...record, data: { ...record.data, ...effects.data } })
        .returning(returningNothing);
      await db.execute(withAuditRow(insert, effects.audit, record.createdAt));
    },

    async find(tokenHash, kind) {
      const [row] = await db
        .select()
        .from(agpTokens)
        .where(and(eq(agpTokens.tokenHash, tokenHash), eq(agpTokens.kind, kind)));
      return row ? toToken(row) : null;
    },

    async consume(tokenHash, kind, at, verify, effects = {}) {
      return db.transaction(async (tx) => {
        const [row] = await tx
          .select()
          .from(agpTokens)
          .where(and(eq(agpTokens.tokenHash, tokenHash), eq(agpTokens.kind, kind)))
          .for('update');
        const record = row ? toToken(row) : null;
        verify(record);
        if (!record) throw new Error('verify accepted a token that does not exist');
        const [updated] = await tx
          .update(agpTokens)
          .set({ consumedAt: at, ...(effects.data ? { data: mergeData(effects.data) } : {}) })
          .where(and(eq(agpTokens.tokenHash, tokenHash), isNull(agpTokens.consumedAt)))
          .returning();
        // The row lock makes this unreachable; kept so a missing lock can never mean a double spend.
        if (!updated) throw new Error('token consumed concurrently');
        await appendAudit(tx, effects.audit, at);
        return toToken(updated);
      });
    },

    async finish(tokenHash, at, effects) {
      const update = db
        .update(agpTokens)
        .set({
          ...(effects.release ? { consumedAt: null } : {}),
          ...(effects.data ? { data: mergeData(effects.data) } : {}),
        })
        .where(eq(agpTokens.tokenHash, tokenHash))
        .returning(returningNothing);
      await db.execute(withAuditRow(update, effects.audit, at));
    },

    async recordOpenExecute(record) {
      await db.execute(sql`with ${sql.join(openExecuteCtes(record), sql`, `)} select 1`);
    },

    async deleteExpired(before) {
      const deleted = await db.delete(agpTokens).where(lte(agpTokens.expiresAt, before)).returning({ tokenHash: agpTokens.tokenHash });
      return deleted.length;
    },
  };
}

/**
 * The statements of every request with an Idempotency-Key, built once: drizzle then only fills in
 * their parameters. A placeholder in a condition reaches the driver as given (only inserted values go
 * through their column's mapping): times there are passed as text, which both drivers read as a timestamptz.
 */
function idempotencyStatements(db: Db) {
  const value = (name: string) => sql.placeholder(name);
  return {
    acquire: db
      .insert(idempotencyKeys)
      .values({
        agentId: value('agentId'),
        key: value('key'),
        requestHash: value('requestHash'),
        status: 'in_flight',
        responseStatus: null,
        responseBody: null,
        createdAt: value('createdAt'),
        expiresAt: value('expiresAt'),
      })
      .onConflictDoUpdate({
        target: [idempotencyKeys.agentId, idempotencyKeys.key],
        set: {
          requestHash: sql`excluded.request_hash`,
          status: 'in_flight',
          responseStatus: null,
          responseBody: null,
          createdAt: sql`excluded.created_at`,
          expiresAt: sql`excluded.expires_at`,
        },
        // Only a row past its 24 hours, or the abandoned claim of this very request, is replaced.
        setWhere: or(
          lte(idempotencyKeys.expiresAt, sql`excluded.created_at`),
          and(
            eq(idempotencyKeys.status, 'in_flight'),
            lte(idempotencyKeys.createdAt, sql`${value('staleBefore')}::timestamptz`),
            eq(idempotencyKeys.requestHash, sql`excluded.request_hash`),
          ),
        ),
      })
      .returning({ key: idempotencyKeys.key })
      .prepare('twokey_idempotency_acquire'),
    complete: db
      .update(idempotencyKeys)
      .set({ status: 'done', responseStatus: sql`${value('responseStatus')}::int`, responseBody: sql`${value('responseBody')}::jsonb` })
      .where(
        and(
          eq(idempotencyKeys.agentId, value('agentId')),
          eq(idempotencyKeys.key, value('key')),
          eq(idempotencyKeys.createdAt, sql`${value('createdAt')}::timestamptz`),
          eq(idempotencyKeys.status, 'in_flight'),
        ),
      )
      .prepare('twokey_idempotency_complete'),
  };
}

/** Claims sent together, and completions: at most this many in one statement. */
const IDEMPOTENCY_BATCH = 64;

interface Acquiring {
  claim: IdempotencyClaim;
  staleBefore: Date;
}

interface Completing {
  agentId: string;
  key: string;
  createdAt: Date;
  responseStatus: number;
  /** The sealed answer; null (or undefined) is stored as SQL null. */
  responseBody: unknown;
  attached: OpenExecuteRecord | undefined;
}

/**
 * Many claims in one statement, as the prepared one takes one: each row is inserted, or replaces an
 * expired row or the stale claim of the same request (its own `stale_before`), or is left alone
 * (another request holds the key). Rows go in key order, so two replicas' batches cannot deadlock.
 */
function acquireBatch(items: readonly Acquiring[]): SQL {
  const rows = items.map(({ claim, staleBefore }) => ({
    agent_id: claim.agentId,
    key: claim.key,
    request_hash: claim.requestHash,
    created_at: claim.createdAt.toISOString(),
    expires_at: claim.expiresAt.toISOString(),
    stale_before: staleBefore.toISOString(),
  }));
  return sql`with claims as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        as r(agent_id text, key text, request_hash text, created_at timestamptz, expires_at timestamptz, stale_before timestamptz))
    insert into idempotency_keys (agent_id, key, request_hash, status, response_status, response_body, created_at, expires_at)
    select agent_id, key, request_hash, 'in_flight', null, null, created_at, expires_at from claims order by agent_id, key
    on conflict (agent_id, key) do update set
      request_hash = excluded.request_hash, status = 'in_flight', response_status = null, response_body = null,
      created_at = excluded.created_at, expires_at = excluded.expires_at
    where idempotency_keys.expires_at <= excluded.created_at
      or (idempotency_keys.status = 'in_flight'
        and idempotency_keys.request_hash = excluded.request_hash
        and idempotency_keys.created_at <= (select c.stale_before from claims c where c.agent_id = excluded.agent_id and c.key = excluded.key))
    returning agent_id, key`;
}

/** Many completions in one statement: each key's answer, and every `open` execute's record attached to one. */
function completeBatch(items: readonly Completing[]): SQL {
  const answers = items.map((item) => ({
    agent_id: item.agentId,
    key: item.key,
    created_at: item.createdAt.toISOString(),
    response_status: item.responseStatus,
    response_body: item.responseBody ?? null,
    expected_status: 'in_flight',
  }));
  const records = items.flatMap((item) => (item.attached ? [item.attached] : []));
  const ctes = [
    ...(records.length > 0
      ? [
          rowsInsertCte(
            agpTokens,
            'minted_tokens',
            records.flatMap((record) => record.minted),
          ),
          ...auditInsertCtes(records.map((record) => ({ event: record.event, at: record.at }))),
        ]
      : []),
    sql`answers as (
      select * from jsonb_to_recordset(${JSON.stringify(answers)}::jsonb)
        as r(agent_id text, key text, created_at timestamptz, response_status int, response_body jsonb, expected_status text))`,
    // The status a key must still have rides in the rows, a join condition: written as a constant
    // filter, the planner, whose statistics see almost no key in flight, scanned the whole table
    // for them instead of looking each key up by its primary key (2 ms at 20,000 keys, and growing).
    sql`completed as (
      update idempotency_keys set status = 'done', response_status = answers.response_status, response_body = answers.response_body
      from answers
      where idempotency_keys.agent_id = answers.agent_id and idempotency_keys.key = answers.key
        and idempotency_keys.created_at = answers.created_at and idempotency_keys.status = answers.expected_status
      returning 1)`,
  ];
  return sql`with ${sql.join(ctes, sql`, `)} select 1`;
}

const scopeKey = (agentId: string, key: string): string => `${agentId}\u0000${key}`;

/**
 * The Idempotency-Key store. An `open` execute's record rides in the statement that settles its key
 * (`attached`): the execute costs the key's claim and this one statement. Claims, and completions,
 * that arrive while one is on its way to the database share the next statement (src/lib/group-commit.ts):
 * under load, one round trip settles many requests' keys.
 */
export function createIdempotencyStore(db: Db): IdempotencyStore<OpenExecuteRecord> {
  const statements = idempotencyStatements(db);
  const releasing = (agentId: string, key: string, createdAt: Date) =>
    db
      .delete(idempotencyKeys)
      .where(
        and(
          eq(idempotencyKeys.agentId, agentId),
          eq(idempotencyKeys.key, key),
          eq(idempotencyKeys.createdAt, createdAt),
          eq(idempotencyKeys.status, 'in_flight'),
        ),
      );

  const acquire = createGroupCommit<Acquiring, boolean>({
    maxBatch: IDEMPOTENCY_BATCH,
    // The same key twice in one INSERT … ON CONFLICT DO UPDATE is an error, not a race PostgreSQL settles.
    keyOf: ({ claim }) => scopeKey(claim.agentId, claim.key),
    async runOne({ claim, staleBefore }) {
      const taken = await statements.acquire.execute({ ...claim, staleBefore: staleBefore.toISOString() });
      return taken.length === 1;
    },
    async runBatch(items) {
      const taken = new Set(rowsOf<{ agent_id: string; key: string }>(await db.execute(acquireBatch(items))).map((row) => scopeKey(row.agent_id, row.key)));
      return items.map(({ claim }) => taken.has(scopeKey(claim.agentId, claim.key)));
    },
  });

  const complete = createGroupCommit<Completing, void>({
    maxBatch: IDEMPOTENCY_BATCH,
    async runOne(item) {
      // With an execute's record, the batch's statement for one: one text for both, no copy of it.
      if (item.attached) return void (await db.execute(completeBatch([item])));
      const { agentId, key, createdAt, responseStatus, responseBody } = item;
      // As the column would map it: JSON text, and null as SQL null.
      const body = responseBody === null || responseBody === undefined ? null : JSON.stringify(responseBody);
      await statements.complete.execute({ agentId, key, createdAt: createdAt.toISOString(), responseStatus, responseBody: body });
    },
    async runBatch(items) {
      await db.execute(completeBatch(items));
      return items.map(() => undefined);
    },
  });

  return {
    acquire: (claim, staleBefore) => acquire({ claim, staleBefore }),

    async get(agentId, key) {
      const [row] = await db
        .select()
        .from(idempotencyKeys)
        .where(and(eq(idempotencyKeys.agentId, agentId), eq(idempotencyKeys.key, key)));
      return row ? toIdempotency(row) : null;
    },

    complete: (agentId, key, createdAt, responseStatus, responseBody, attached) =>
      complete({ agentId, key, createdAt, responseStatus, responseBody, attached }),

    async release(agentId, key, createdAt, attached) {
      if (!attached) {
        await releasing(agentId, key, createdAt);
        return;
      }
      await db.execute(
        sql`with ${sql.join(openExecuteCtes(attached), sql`, `)}, released as (${releasing(agentId, key, createdAt).returning(returningNothing).getSQL()}) select 1`,
      );
    },

    async deleteExpired(now) {
      const deleted = await db.delete(idempotencyKeys).where(lte(idempotencyKeys.expiresAt, now)).returning({ key: idempotencyKeys.key });
      return deleted.length;
    },
  };
}
