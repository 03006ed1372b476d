import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * A transaction must run on a connection of its own. postgres.js's `sql.begin` hands BEGIN to any
 * pooled connection — a busy one when every connection is busy — and reserves it for the
 * transaction only if that write did not fill the connection's pipeline (100 queries). When it
 * did, the BEGIN runs on a connection the pool still shares: postgres.js answers
 * UNSAFE_TRANSACTION (a lost decision), and the reads queued behind it run inside that open
 * transaction. Here two connections serve 200 decisions, 20 at once in each of 10 rounds, each
 * round queued behind a burst of reads (approvers' previews, agents' polls) as a busy server
 * queues them. Before transactions reserved their connection, 4 of the 200 were lost this way.
 */
const DECISIONS = 200;
const ROUNDS = 10;
/** postgres.js pipelines up to 100 queries on a connection (its `max_pipeline`) before it counts as full. */
const PIPELINE = 100;
/**
 * Reads that fill both connections' pipelines (each takes its running query and 100 more) give or
 * take a few, one count per round: in some round a BEGIN is the write that fills a pipeline.
 */
const readsInRound = (round: number) => 2 * (PIPELINE + 1) - ROUNDS / 2 + round;

describeOnPostgres('a pool of 2 connections saturated by 200 decisions and the reads around them', (driver) => {
  let database: Database;
  let twokey: TestTwokey;
  let ids: string[];

  beforeAll(async () => {
    database = await openTestDatabase(driver, { poolSize: 2 });
    // No background polling: the test decides what the pool queues, and in which order.
    twokey = await startTestTwokey({
      driver,
      database,
      outboxPollMs: 600_000,
      auditIntervalMs: 600_000,
      env: { TWOKEY_MAX_PENDING_PER_AGENT: '1000' },
    });
    const { apiKey } = await twokey.createAgent('busy');
    ids = [];
    for (let i = 0; i < DECISIONS; i += 1) {
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        body: { operation: 'upgrade_plan', params: { org: `org-${i}`, plan: 'scale', amount_cents: 100 } },
      });
      expect(proposed.status).toBe(201);
      ids.push(proposed.body.id);
    }
  }, 120_000);

  afterAll(async () => {
    await twokey?.close();
    await database?.close();
  });

  it('every decision lands once, none fails with UNSAFE_TRANSACTION, and no read ran inside a transaction', async () => {
    const { store, proposals } = twokey.services;
    const settled: Array<{ id: string; outcome: string; error: string | null }> = [];
    const perRound = DECISIONS / ROUNDS;
    for (let round = 0; round < ROUNDS; round += 1) {
      const roundIds = ids.slice(round * perRound, (round + 1) * perRound);
      const reads = Array.from({ length: readsInRound(round) }, (_, i) => store.getProposal(roundIds[i % perRound] ?? ''));
      // The reads reach the pool first; the round's transactions queue behind them.
      await new Promise((queued) => setImmediate(queued));
      const decisions = roundIds.map((id) =>
        proposals.approve(id, { identity: 'web:alice', via: 'test' }).then(
          (result) => ({ id, outcome: result.outcome as string, error: null }),
          (error: unknown) => ({ id, outcome: 'failed', error: (error as { code?: string }).code ?? String(error) }),
        ),
      );
      settled.push(...(await Promise.all(decisions)));
      await Promise.all(reads);
    }
    const failures = settled.filter((decision) => decision.outcome !== 'quorum_reached');
    expect(failures.filter((failure) => failure.error === 'UNSAFE_TRANSACTION')).toEqual([]);
    expect(failures).toEqual([]);
    const rows = await database.db.execute(
      sql`select p.status, count(a.approver)::int as approvals from proposals p left join approvals a on a.proposal_id = p.id
          where p.id in ${ids} group by p.id, p.status`,
    );
    const summary = (rows as unknown as Array<{ status: string; approvals: number }>).map((row) => `${row.status}:${row.approvals}`);
    expect(summary).toEqual(ids.map(() => 'approved:1'));
    // With twokey stopped, no session may be left inside a transaction that nobody will commit.
    await twokey.close();
    const stranded = await database.db.execute(
      sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`,
    );
    expect(Number((stranded as unknown as Array<{ n: number }>)[0]?.n)).toBe(0);
  }, 120_000);
});
