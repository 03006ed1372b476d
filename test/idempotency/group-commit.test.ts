import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRecordedDatabase, SqlRecorder } from '../../bench/support/sql-trace.js';
import { sha256Hex } from '../../src/core/secrets.js';
import { createIdempotencyStore } from '../../src/db/agp-store.js';
import type { Database } from '../../src/db/database.js';
import { agents, agpTokens, auditEvents } from '../../src/db/schema.js';
import type { IdempotencyClaim } from '../../src/idempotency/ports.js';
import { eq } from 'drizzle-orm';
import { cutSleepingStatement, describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';
import { openExecuteRecord } from './records.js';

/**
 * Concurrent requests' Idempotency-Keys are claimed, and settled, together: what arrives while one
 * statement is on its way goes in the next one. Each key must come out exactly as if it had been sent
 * on its own — taken or not, its answer, the record attached to it — and a write the database refuses
 * must fail alone.
 */
describe.each(drivers)('Idempotency-Keys settled together (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let database: Database;
  let closeDatabases: () => Promise<void>;
  let store: ReturnType<typeof createIdempotencyStore>;
  const agentId = 'agt_group_commit';
  const now = new Date('2026-11-28T12:00:00.000Z');
  const expiresAt = new Date(now.getTime() + 86_400_000);
  /** As the Idempotency-Key hooks ask: a claim in flight for 2 minutes belongs to a process that died. */
  const staleBefore = new Date(now.getTime() - 2 * 60_000);

  beforeAll(async () => {
    const scratch = driver === 'postgres' ? await openTestDatabase('postgres') : null;
    database = await openRecordedDatabase(scratch?.url, recorder);
    closeDatabases = async () => {
      await database.close();
      await scratch?.close();
    };
    await database.db.insert(agents).values({
      id: agentId,
      name: 'grouped',
      keyHash: sha256Hex('grouped'),
      keyPrefix: 'tk_grp',
      callbackSecret: 'whsec_grouped',
      owners: [],
      createdAt: now,
    });
    store = createIdempotencyStore(database.db);
  }, 120_000);
  afterAll(() => closeDatabases?.());

  const claim = (key: string, requestHash = 'h', createdAt = now): IdempotencyClaim => ({ agentId, key, requestHash, createdAt, expiresAt });
  const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;
  const openExecute = (transactionId: string, tokenHash?: string) =>
    openExecuteRecord({ agentId, agentName: 'grouped', transactionId, at: now, expiresAt, ...(tokenHash ? { tokenHash } : {}) });
  const auditOf = async (transactionId: string) =>
    (await database.db.select().from(auditEvents)).filter((row) => (row.data as Record<string, unknown>)['transactionId'] === transactionId).length;

  it('claims keys that arrive together in two statements, not one each, and takes each as it would alone', async () => {
    const held = unique('held');
    expect(await store.acquire(claim(held), staleBefore)).toBe(true);
    const keys = Array.from({ length: 8 }, (_, index) => unique(`k${index}`));
    const { value: taken, statements } = await recorder.during(() =>
      Promise.all([...keys.map((key) => store.acquire(claim(key), staleBefore)), store.acquire(claim(held), staleBefore)]),
    );
    // The first goes at once, as itself (unless the previous write's round trip has not quite
    // finished), and the rest queue behind it and go as one.
    expect(statements.length).toBeLessThanOrEqual(2);
    expect(taken).toEqual([...keys.map(() => true), false]);
    for (const key of keys) expect(await store.get(agentId, key)).toMatchObject({ status: 'in_flight', requestHash: 'h' });
  });

  it('gives a key sent twice at once to one of them only', async () => {
    const key = unique('twice');
    const taken = await Promise.all([
      store.acquire(claim(unique('first')), staleBefore),
      store.acquire(claim(key), staleBefore),
      store.acquire(claim(key), staleBefore),
    ]);
    expect(taken.slice(1).sort()).toEqual([false, true]);
  });

  it('in a batch, takes over an expired key and the stale claim of the same request, and nothing else', async () => {
    const [expired, stale, staleOther, fresh] = [unique('expired'), unique('stale'), unique('stale-other'), unique('fresh')];
    const earlier = new Date(now.getTime() - 10 * 60_000);
    await store.acquire({ ...claim(expired), createdAt: new Date(now.getTime() - 86_400_001), expiresAt: new Date(now.getTime() - 1) }, staleBefore);
    await store.acquire(claim(stale, 'same', earlier), staleBefore);
    await store.acquire(claim(staleOther, 'other', earlier), staleBefore);
    await store.acquire(claim(fresh, 'same', now), staleBefore);
    const later = new Date(now.getTime() + 1_000);
    const { value: taken, statements } = await recorder.during(() =>
      Promise.all([
        store.acquire(claim(unique('lead')), staleBefore),
        store.acquire(claim(expired, 'h', later), staleBefore),
        store.acquire(claim(stale, 'same', later), staleBefore),
        store.acquire(claim(staleOther, 'same', later), staleBefore),
        store.acquire(claim(fresh, 'same', later), staleBefore),
      ]),
    );
    expect(statements.length).toBeLessThanOrEqual(2);
    expect(taken).toEqual([true, true, true, false, false]);
    expect((await store.get(agentId, stale))?.createdAt).toEqual(later);
    expect((await store.get(agentId, fresh))?.createdAt).toEqual(now);
  });

  it("settles keys together with their answers and every execute's record, an answer too large to keep as SQL null", async () => {
    const keys = Array.from({ length: 5 }, (_, index) => unique(`done${index}`));
    for (const key of keys) await store.acquire(claim(key), staleBefore);
    const transactions = keys.map((key) => `txn_${key}`);
    const { statements } = await recorder.during(() =>
      Promise.all(
        keys.map((key, index) =>
          store.complete(agentId, key, now, 200, index === 4 ? null : { sealed: key }, index % 2 === 0 ? openExecute(transactions[index] ?? '') : undefined),
        ),
      ),
    );
    expect(statements.length).toBeLessThanOrEqual(2);
    for (const [index, key] of keys.entries()) {
      expect(await store.get(agentId, key)).toMatchObject({ status: 'done', responseStatus: 200, responseBody: index === 4 ? null : { sealed: key } });
      const transactionId = transactions[index] ?? '';
      const minted = await database.db
        .select()
        .from(agpTokens)
        .where(eq(agpTokens.tokenHash, sha256Hex(transactionId)));
      expect({ audit: await auditOf(transactionId), minted: minted.length }).toEqual(index % 2 === 0 ? { audit: 1, minted: 1 } : { audit: 0, minted: 0 });
    }
  });

  it('leaves alone a key whose claim was taken over, in a batch as on its own', async () => {
    const [kept, overtaken] = [unique('kept'), unique('overtaken')];
    await store.acquire(claim(kept), staleBefore);
    await store.acquire(claim(overtaken), staleBefore);
    await Promise.all([
      store.complete(agentId, unique('unclaimed'), now, 200, { sealed: 'nobody' }),
      store.complete(agentId, kept, now, 200, { sealed: 'kept' }),
      // Another claim (created later) holds it now: this answer is not its answer.
      store.complete(agentId, overtaken, new Date(now.getTime() - 1), 200, { sealed: 'late' }),
    ]);
    expect(await store.get(agentId, kept)).toMatchObject({ status: 'done', responseBody: { sealed: 'kept' } });
    expect(await store.get(agentId, overtaken)).toMatchObject({ status: 'in_flight', responseBody: null });
  });

  it('fails only the write the database refuses: the others of its batch are settled as if sent alone', async () => {
    const taken = sha256Hex(unique('taken-token'));
    const keys = Array.from({ length: 4 }, (_, index) => unique(`refused${index}`));
    for (const key of keys) await store.acquire(claim(key), staleBefore);
    // The third execute minted a token whose hash is already stored: the database refuses that row.
    await store.complete(agentId, keys[0] ?? '', now, 200, { sealed: 'first' }, openExecute(`txn_first_${keys[0]}`, taken));
    const outcomes = await Promise.all(
      keys.slice(1).map((key, index) =>
        store.complete(agentId, key, now, 200, { sealed: key }, openExecute(`txn_${key}`, index === 1 ? taken : undefined)).then(
          () => 'settled',
          () => 'refused',
        ),
      ),
    );
    expect(outcomes).toEqual(['settled', 'refused', 'settled']);
    expect(await store.get(agentId, keys[2] ?? '')).toMatchObject({ status: 'in_flight' });
    expect(await auditOf(`txn_${keys[2]}`)).toBe(0);
    for (const key of [keys[1], keys[3]]) {
      expect(await store.get(agentId, key ?? '')).toMatchObject({ status: 'done', responseBody: { sealed: key } });
      expect(await auditOf(`txn_${key}`)).toBe(1);
    }

    // A claim the database refuses (no such agent) fails alone too.
    const claims = await Promise.all([
      store.acquire(claim(unique('lead')), staleBefore),
      store.acquire({ ...claim(unique('ok1')) }, staleBefore),
      store.acquire({ ...claim(unique('orphan')), agentId: 'agt_nobody' }, staleBefore).then(
        () => 'taken',
        () => 'refused',
      ),
      store.acquire({ ...claim(unique('ok2')) }, staleBefore),
    ]);
    expect(claims).toEqual([true, true, 'refused', true]);
  });
});

/**
 * A batch whose connection breaks before its answer may have committed: sent again one write at a
 * time, what it wrote would be written twice (an execute's audit row, its minted token). So every
 * write of it fails, as a lone statement would, and none is sent again.
 */
describeOnPostgres('Idempotency-Keys whose batch lost its connection', () => {
  let scratch: Database & { url?: string };
  let store: ReturnType<typeof createIdempotencyStore>;
  const agentId = 'agt_group_commit_lost';
  const now = new Date('2026-11-28T12:00:00.000Z');
  const claim = (key: string): IdempotencyClaim => ({ agentId, key, requestHash: 'h', createdAt: now, expiresAt: new Date(now.getTime() + 86_400_000) });
  const staleBefore = new Date(now.getTime() - 2 * 60_000);

  beforeAll(async () => {
    scratch = await openTestDatabase('postgres');
    await scratch.db.insert(agents).values({
      id: agentId,
      name: 'lost',
      keyHash: sha256Hex('lost'),
      keyPrefix: 'tk_lost',
      callbackSecret: 'whsec_lost',
      owners: [],
      createdAt: now,
    });
    // Holds a claim of a `slow-` key in the database long enough to cut its connection meanwhile.
    await scratch.db.execute(sql`create function slow_claim() returns trigger language plpgsql as $$
      begin if new.key like 'slow-%' then perform pg_sleep(5); end if; return new; end $$`);
    await scratch.db.execute(sql`create trigger slow_claim before insert on idempotency_keys for each row execute function slow_claim()`);
    store = createIdempotencyStore(scratch.db);
  }, 120_000);
  afterAll(() => scratch?.close());

  it('fails every claim of the batch and sends none of them again', async () => {
    const outcomes = Promise.all(
      ['lead', 'slow-1', 'slow-2'].map((key) =>
        store.acquire(claim(key), staleBefore).then(
          (taken) => ({ taken }),
          () => 'failed',
        ),
      ),
    );
    // The batch (the lead went first, alone) is the statement sleeping in the trigger.
    await cutSleepingStatement(scratch.url ?? '');
    expect(await outcomes).toEqual([{ taken: true }, 'failed', 'failed']);
    expect(await store.get(agentId, 'slow-1')).toBeNull();
    expect(await store.get(agentId, 'slow-2')).toBeNull();
  }, 20_000);
});

/**
 * Settling a key looks it up by its primary key, however many keys the table holds. With the
 * key's expected status as a constant filter, the planner, whose statistics saw no key in flight,
 * scanned the whole table instead.
 */
describeOnPostgres('Idempotency-Key completions among many kept keys', () => {
  const recorder = new SqlRecorder();
  let scratch: Database & { url?: string };
  let recorded: Database;
  const agentId = 'agt_group_commit_many';
  const now = new Date('2026-11-28T12:00:00.000Z');
  const expiresAt = new Date(now.getTime() + 86_400_000);

  beforeAll(async () => {
    scratch = await openTestDatabase('postgres');
    recorded = await openRecordedDatabase(scratch.url, recorder);
    await scratch.db
      .insert(agents)
      .values({ id: agentId, name: 'many', keyHash: sha256Hex('many'), keyPrefix: 'tk_many', callbackSecret: 'whsec_many', owners: [], createdAt: now });
    await scratch.db.execute(sql`insert into idempotency_keys
      select ${agentId}, 'kept-' || n, 'h', 'done', 200, null, now(), now() + interval '1 day' from generate_series(1, 20000) as n`);
    await scratch.db.execute(sql`analyze idempotency_keys`);
  }, 120_000);
  afterAll(async () => {
    await recorded?.close();
    await scratch?.close();
  });

  it('finds each key by its primary key, alone with a record and in a batch', async () => {
    const store = createIdempotencyStore(recorded.db);
    const staleBefore = new Date(now.getTime() - 2 * 60_000);
    const keys = ['one', 'two', 'three'];
    for (const key of keys) await store.acquire({ agentId, key, requestHash: 'h', createdAt: now, expiresAt }, staleBefore);
    const record = (transactionId: string) => openExecuteRecord({ agentId, agentName: 'many', transactionId, at: now, expiresAt });
    const { statements } = await recorder.during(async () => {
      await store.complete(agentId, 'one', now, 200, { sealed: 'one' }, record('txn_many_one'));
      await Promise.all(keys.slice(1).map((key) => store.complete(agentId, key, now, 200, { sealed: key }, record(`txn_many_${key}`))));
    });
    const settling = statements.filter((statement) => /completed as \(\s*update idempotency_keys/.test(statement.text));
    expect(settling.length).toBeGreaterThanOrEqual(2);
    const explain = postgres(scratch.url ?? '', { max: 1, onnotice: () => {} });
    try {
      for (const statement of settling) {
        const plan = JSON.stringify(await explain.unsafe(`explain (format json) ${statement.text}`, statement.params as never[]));
        expect(plan).toContain('idempotency_keys_agent_id_key_pk');
        expect(plan).not.toMatch(/"Node Type":\s*"Seq Scan",[^}]*"Relation Name":\s*"idempotency_keys"/);
      }
    } finally {
      await explain.end();
    }
    for (const key of keys) expect(await store.get(agentId, key)).toMatchObject({ status: 'done', responseBody: { sealed: key } });
  });
});
