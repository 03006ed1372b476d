import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.js';
import { agents, auditEvents, jobs } from '../../src/db/schema.js';
import { NoLongerExecutingError, type StoreTransaction } from '../../src/core/ports.js';
import { createStore } from '../../src/db/store.js';
import { plainReason } from '../../src/lib/driver-errors.js';
import { cutSleepingStatement, describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * The store's transaction sends what it buffered (audit rows, jobs, notifications) last; on
 * PostgreSQL in the same packet as the COMMIT. Whatever the driver, that statement is part of the
 * transaction: it lands with the change, or it fails and nothing lands.
 */
describe.each(drivers)('store transactions (%s)', (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  }, 180_000);
  afterAll(() => database.close());

  const at = new Date('2026-11-24T10:00:00.000Z');
  const agent = (id: string) => agentRecord(id, at);
  const rows = async (id: string) => ({
    agents: await database.db.select().from(agents).where(eq(agents.id, id)),
    audit: await database.db.select().from(auditEvents).where(eq(auditEvents.agentId, id)),
    jobs: await database.db
      .select()
      .from(jobs)
      .where(sql`${jobs.payload}->>'proposalId' = ${id}`),
  });

  it('commits the change with its buffered audit row and job', async () => {
    const store = createStore(database.db);
    const answer = await store.transaction(async (tx) => {
      await tx.insertAgent(agent('agt_lands'));
      await tx.appendAudit({ type: 'agent.created', actor: 'test', agentId: 'agt_lands' }, at);
      await tx.enqueue([{ kind: 'proposal.escalate', payload: { proposalId: 'agt_lands' } }], at);
      return 'done';
    });
    expect(answer).toBe('done');
    const landed = await rows('agt_lands');
    expect(landed.agents).toHaveLength(1);
    expect(landed.audit.map((row) => row.type)).toEqual(['agent.created']);
    expect(landed.jobs).toHaveLength(1);
  });

  it('queues one coalescing job per kind and key, however often the transaction asks', async () => {
    const store = createStore(database.db);
    const sync = { kind: 'chat.sync', payload: { proposalId: 'agt_coalesced', platform: 'slack' }, orderingKey: 'sync:agt_coalesced', coalesce: true } as const;
    await store.transaction(async (tx) => {
      await tx.insertAgent(agent('agt_coalesced'));
      await tx.enqueue([sync], at);
      await tx.enqueue([sync, { ...sync, coalesce: false }], at);
    });
    // The two coalescing ones are one job; the one that does not coalesce is a job of its own.
    expect((await rows('agt_coalesced')).jobs).toHaveLength(2);
  });

  it('a buffered write the database refuses rolls the whole change back and is thrown', async () => {
    const store = createStore(database.db);
    // PostgreSQL's jsonb holds no NUL: the audit row fails in the buffered statement, after the
    // agent row was written earlier in the same transaction.
    await expect(
      store.transaction(async (tx) => {
        await tx.insertAgent(agent('agt_rolled_back'));
        await tx.appendAudit({ type: 'agent.created', actor: 'test', agentId: 'agt_rolled_back', data: { bad: '\u0000' } }, at);
        await tx.enqueue([{ kind: 'proposal.escalate', payload: { proposalId: 'agt_rolled_back' } }], at);
      }),
    ).rejects.toThrow(/unicode|\\u0000/i);
    const left = await rows('agt_rolled_back');
    expect(left).toEqual({ agents: [], audit: [], jobs: [] });
    // The connection the failure happened on serves the next transaction normally.
    for (let i = 0; i < 3; i += 1) {
      await store.transaction(async (tx) => {
        await tx.insertAgent(agent(`agt_after_${i}`));
        await tx.appendAudit({ type: 'agent.created', actor: 'test', agentId: `agt_after_${i}` }, at);
      });
      expect((await rows(`agt_after_${i}`)).audit).toHaveLength(1);
    }
  });

  it('records a remote result in one statement only while the claim is still this one; otherwise writes nothing and says so', async () => {
    const store = createStore(database.db);
    const id = 'agt_finishing';
    await store.transaction(async (tx) => {
      await tx.insertAgent(agent(id));
      await tx.insertProposal(proposalRecord({ id, agentId: id, tokenHash: `token_${id}`, status: 'executing', executionAttempts: 1, leaseUntil: at }));
    });
    const committed = { status: 'committed' as const, consumedAt: at, result: { done: true }, leaseUntil: null, updatedAt: at };
    const finish = (attempts: number, before?: (tx: StoreTransaction) => Promise<unknown>) =>
      store.transaction(async (tx) => {
        await before?.(tx);
        tx.finishExecutingProposal(id, attempts, committed);
        await tx.appendAudit({ type: 'proposal.committed', actor: 'test', proposalId: id, agentId: id }, at);
        await tx.enqueue([{ kind: 'proposal.escalate', payload: { proposalId: id } }], at);
        return 'recorded';
      });

    // Another replica took the claim over (a second attempt): neither the update nor its rows land,
    // whether the statement commits by itself or ends a transaction that wrote before it.
    await expect(finish(2)).rejects.toBeInstanceOf(NoLongerExecutingError);
    await expect(finish(2, (tx) => tx.insertAgent(agent('agt_finishing_other')))).rejects.toBeInstanceOf(NoLongerExecutingError);
    expect(await rows('agt_finishing_other')).toEqual({ agents: [], audit: [], jobs: [] });
    expect(await store.getProposal(id)).toMatchObject({ status: 'executing', consumedAt: null });
    expect(await rows(id)).toMatchObject({ audit: [], jobs: [] });

    expect(await finish(1)).toBe('recorded');
    expect(await store.getProposal(id)).toMatchObject({ status: 'committed', result: { done: true }, executionAttempts: 1 });
    const landed = await rows(id);
    expect(landed.audit.map((row) => row.type)).toEqual(['proposal.committed']);
    expect(landed.jobs).toHaveLength(1);
    // Once recorded, a second result matches nothing.
    await expect(finish(1)).rejects.toBeInstanceOf(NoLongerExecutingError);
    expect((await rows(id)).audit).toHaveLength(1);
  });

  it("writes a locked proposal's update and its approval with the buffered rows, as the update leaves the row; a second approval of one person fails the whole change", async () => {
    const store = createStore(database.db);
    const id = 'agt_locked_writes';
    await store.transaction(async (tx) => {
      await tx.insertAgent(agent(id));
      await tx.insertProposal(proposalRecord({ id, agentId: id, tokenHash: `token_${id}`, quorum: 2 }));
    });
    const later = new Date(at.getTime() + 1_000);
    const approval = { proposalId: id, approver: 'web:alice', matchedRule: 'web:alice', via: 'test', at: later, stepUp: null };
    const answered = await store.transaction(async (tx) => {
      const locked = await tx.lockProposalWithContext(id);
      if (!locked) throw new Error('no proposal');
      tx.addApproval(approval);
      // Two changes of one row in one transaction: both land (one update of their merged columns).
      const counted = tx.updateProposal(locked.proposal, { reminders: 1, updatedAt: later });
      const approved = tx.updateProposal(counted, { status: 'approved', decidedBy: 'web:alice', decidedAt: later });
      await tx.appendAudit({ type: 'proposal.approved', actor: 'web:alice', proposalId: id, agentId: id }, later);
      return approved;
    });
    const stored = await store.getProposal(id);
    expect(stored).toEqual(answered);
    expect(stored).toMatchObject({ status: 'approved', reminders: 1, decidedBy: 'web:alice', updatedAt: later });
    expect(await store.listApprovals(id)).toEqual([approval]);
    expect((await rows(id)).audit.map((row) => row.type)).toEqual(['proposal.approved']);

    // The caller checks, under the lock, that the approver is not counted yet; if it did not, the
    // database refuses the second row and nothing of that change lands.
    await expect(
      store
        .transaction(async (tx) => {
          const locked = await tx.lockProposalWithContext(id);
          if (!locked) throw new Error('no proposal');
          tx.addApproval({ ...approval, at: new Date(later.getTime() + 1_000) });
          tx.updateProposal(locked.proposal, { status: 'rejected' });
          await tx.appendAudit({ type: 'approval.recorded', actor: 'web:alice', proposalId: id, agentId: id }, later);
        })
        .catch((error: unknown) => Promise.reject(new Error(plainReason(error)))),
    ).rejects.toThrow(/duplicate key value violates unique constraint "approvals_/);
    expect(await store.getProposal(id)).toEqual(answered);
    expect((await rows(id)).audit).toHaveLength(1);

    // A locked row's write needs its lock: without one, nothing is sent.
    await expect(store.transaction(async (tx) => void tx.updateProposal(answered, { reminders: 5 }))).rejects.toThrow(/took no lock/);
    expect(await store.getProposal(id)).toMatchObject({ reminders: 1 });

    // The answer is the row as the one merged update leaves it, even to a caller still holding the
    // row as it was locked: what the transaction goes on with is what lands.
    const asAnswered = await store.transaction(async (tx) => {
      const locked = await tx.lockProposal(id);
      if (!locked) throw new Error('no proposal');
      tx.updateProposal(locked, { reminders: 2 });
      return tx.updateProposal(locked, { escalatedAt: later });
    });
    expect(asAnswered).toMatchObject({ reminders: 2, escalatedAt: later });
    expect(await store.getProposal(id)).toEqual(asAnswered);
  });

  it('a recorded result wakes the outbox only for the jobs it added: a chat edit already queued for later covers the new one, and no lane looks for it now', async () => {
    const woken: Array<{ kinds: readonly string[]; inMs: number | undefined }> = [];
    const store = createStore(database.db, { onJobsQueued: (kinds, inMs) => woken.push({ kinds, inMs }) });
    const sync = (id: string, runAt?: Date) =>
      ({ kind: 'chat.sync', payload: { proposalId: id, platform: 'slack' }, orderingKey: `sync:${id}`, coalesce: true, ...(runAt ? { runAt } : {}) }) as const;
    const committed = { status: 'committed' as const, consumedAt: at, result: { done: true }, leaseUntil: null, updatedAt: at };
    const finish = (id: string, before?: (tx: StoreTransaction) => Promise<unknown>) =>
      store.transaction(async (tx) => {
        await before?.(tx);
        tx.finishExecutingProposal(id, 1, committed);
        await tx.enqueue([sync(id), { kind: 'proposal.escalate', payload: { proposalId: id } }], at);
      });
    // With one statement alone, and as the end of a transaction that wrote before it.
    const ways = [
      { id: 'agt_wake_alone', before: undefined },
      { id: 'agt_wake_in_tx', before: (tx: StoreTransaction) => tx.insertAgent(agent('agt_wake_in_tx_other')) },
    ];
    for (const { id, before } of ways) {
      await store.transaction(async (tx) => {
        await tx.insertAgent(agent(id));
        await tx.insertProposal(proposalRecord({ id, agentId: id, tokenHash: `token_${id}`, status: 'executing', executionAttempts: 1, leaseUntil: at }));
        await tx.enqueue([sync(id, new Date(at.getTime() + 1_000))], at);
      });
      expect(woken.splice(0)).toEqual([{ kinds: ['chat.sync'], inMs: 1_000 }]);
      await finish(id, before);
      // The edit queued for later stands for this change too: one chat job, and only the escalation wakes.
      expect(woken.splice(0)).toEqual([{ kinds: ['proposal.escalate'], inMs: undefined }]);
      expect((await rows(id)).jobs.map((job) => job.kind).sort()).toEqual(['chat.sync', 'proposal.escalate']);
    }
    // With no chat job waiting, the one the result queues goes in, and wakes its lane.
    const id = 'agt_wake_added';
    await store.transaction(async (tx) => {
      await tx.insertAgent(agent(id));
      await tx.insertProposal(proposalRecord({ id, agentId: id, tokenHash: `token_${id}`, status: 'executing', executionAttempts: 1, leaseUntil: at }));
    });
    woken.length = 0;
    await finish(id);
    expect(woken).toEqual([{ kinds: ['chat.sync', 'proposal.escalate'], inMs: undefined }]);
  });

  describe('transactions made only of added rows (group commit)', () => {
    type Work = (tx: StoreTransaction) => Promise<unknown>;
    const audited =
      (id: string, data: Record<string, unknown> = {}): Work =>
      async (tx) => {
        await tx.appendAudit({ type: 'agent.created', actor: 'test', agentId: id, data }, at);
        await tx.appendAudit({ type: 'agent.revoked', actor: 'test', agentId: id }, at);
      };

    /**
     * `first`'s transaction, its statement held at the driver until the `others` have all ended their
     * work and queued behind it; then everything settles. Returns the statements sent and each outcome.
     */
    async function behindOneInFlight(first: Work, others: Work[]) {
      const store = createStore(database.db);
      const send = database.db.execute.bind(database.db);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let inFlight!: () => void;
      const sent = new Promise<void>((resolve) => (inFlight = resolve));
      const held = async (query: Parameters<typeof send>[0]) => {
        inFlight();
        await released;
        return send(query);
      };
      // The store awaits what execute answers: a promise of its result serves as drizzle's query.
      const execute = vi.spyOn(database.db, 'execute').mockImplementationOnce(held as never);
      try {
        const settled = [store.transaction(first)];
        await sent;
        settled.push(...others.map((work) => store.transaction(work)));
        // Their work is a few turns of promises: done before the timers' phase.
        await new Promise((resolve) => setTimeout(resolve, 0));
        release();
        const outcomes = await Promise.allSettled(settled);
        return {
          statements: execute.mock.calls.length,
          outcomes: outcomes.map((outcome) => outcome.status),
          reasons: outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : '')),
        };
      } finally {
        execute.mockRestore();
      }
    }

    it('those that end while one is on its way go together in the next statement, each with all its rows', async () => {
      const ids = Array.from({ length: 20 }, (_, n) => `agt_grouped_${n}`);
      const { statements, outcomes } = await behindOneInFlight(
        audited(ids[0]!),
        ids.slice(1).map((id) => audited(id)),
      );
      expect(outcomes.every((status) => status === 'fulfilled')).toBe(true);
      // The first went alone, at once; the 19 that queued meanwhile shared the next statement.
      expect(statements).toBe(2);
      for (const id of ids) expect((await rows(id)).audit.map((row) => row.type)).toEqual(['agent.created', 'agent.revoked']);
    });

    it('a batch the database refuses is sent again one transaction at a time: only the faulty one fails', async () => {
      const good = ['agt_batch_ok_0', 'agt_batch_ok_1', 'agt_batch_ok_2', 'agt_batch_ok_3'];
      // jsonb holds no NUL: the faulty one's audit row fails the statement it is in.
      const faulty = audited('agt_batch_bad', { bad: '\u0000' });
      const { statements, outcomes, reasons } = await behindOneInFlight(audited('agt_batch_first'), [
        ...good.slice(0, 2).map((id) => audited(id)),
        faulty,
        ...good.slice(2).map((id) => audited(id)),
      ]);
      expect(outcomes).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      expect(reasons[3]).toMatch(/unicode|\\u0000/i);
      // The first alone, the batch of five, then each of the five alone.
      expect(statements).toBe(7);
      for (const id of ['agt_batch_first', ...good]) expect((await rows(id)).audit).toHaveLength(2);
      expect((await rows('agt_batch_bad')).audit).toEqual([]);
    });

    it('a transaction that queues jobs goes in a statement of its own, so that batches keep to a few statement texts', async () => {
      const queued: Work = async (tx) => {
        await tx.appendAudit({ type: 'agent.created', actor: 'test', agentId: 'agt_batch_jobs' }, at);
        await tx.enqueue([{ kind: 'proposal.escalate', payload: { proposalId: 'agt_batch_jobs' } }], at);
      };
      const { statements, outcomes } = await behindOneInFlight(audited('agt_batch_lead'), [audited('agt_batch_a'), queued, audited('agt_batch_b')]);
      expect(outcomes.every((status) => status === 'fulfilled')).toBe(true);
      // The lead; the one with a job, at once; the other two together once the lead is answered.
      expect(statements).toBe(3);
      expect((await rows('agt_batch_jobs')).jobs).toHaveLength(1);
      for (const id of ['agt_batch_lead', 'agt_batch_a', 'agt_batch_b']) expect((await rows(id)).audit).toHaveLength(2);
    });
  });

  it('the row lock and the read after it see what the previous lock holder committed', async () => {
    const store = createStore(database.db);
    await store.transaction((tx) => tx.insertAgent(agent('agt_lock')));
    let releaseFirst: () => void = () => {};
    const firstHolds = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstLocked: () => void = () => {};
    const locked = new Promise<void>((resolve) => (firstLocked = resolve));
    const now = new Date(at.getTime() + 1000);
    const first = store.transaction(async (tx) => {
      await tx.lockAgentAndCountWaiting('agt_lock', now, 10);
      firstLocked();
      await firstHolds;
      await tx.insertProposal(
        proposalRecord({ id: 'prp_lock_1', agentId: 'agt_lock', tokenHash: 't_lock_1', createdAt: at, expiresAt: new Date(at.getTime() + 3_600_000) }),
      );
    });
    await locked;
    // Queued behind the first transaction's lock; its count must include the first's proposal.
    const second = store.transaction((tx) => tx.lockAgentAndCountWaiting('agt_lock', now, 10));
    // On PostgreSQL, release the first only once the second waits for the row lock (PGlite runs
    // one transaction at a time, and the second simply starts after the first).
    if (driver === 'postgres') await waitForLockWaiter(database);
    releaseFirst();
    await first;
    expect(await second).toBe(1);
  });
});

async function waitForLockWaiter(database: Database): Promise<void> {
  for (let attempt = 0; attempt < 500; attempt += 1) {
    const result = await database.db.execute(
      sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
    );
    if (Number((result as unknown as Array<{ n: number }>)[0]?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no transaction ever waited for the row lock');
}

/**
 * A batch of added rows whose connection breaks before its answer may have committed: sent again one
 * transaction at a time, its rows (a proposal, its audit rows) would be written twice. So every
 * transaction of it fails, as a lone statement would, and none is sent again.
 */
describeOnPostgres('transactions of added rows whose batch lost its connection', () => {
  let scratch: Database & { url?: string };
  const at = new Date('2026-11-29T10:00:00.000Z');
  const audited = (agentId: string) => (tx: StoreTransaction) => tx.appendAudit({ type: 'agent.created', actor: 'test', agentId }, at);
  const auditOf = async (agentId: string) => scratch.db.select().from(auditEvents).where(eq(auditEvents.agentId, agentId));

  beforeAll(async () => {
    scratch = await openTestDatabase('postgres');
    // Holds the audit row of a `slow-` agent in the database long enough to cut its connection meanwhile.
    await scratch.db.execute(sql`create function slow_audit() returns trigger language plpgsql as $$
      begin if new.agent_id like 'slow-%' then perform pg_sleep(5); end if; return new; end $$`);
    await scratch.db.execute(sql`create trigger slow_audit before insert on audit_events for each row execute function slow_audit()`);
  }, 120_000);
  afterAll(() => scratch?.close());

  it('fails every transaction of the batch and sends none of them again', async () => {
    const store = createStore(scratch.db);
    const outcomes = Promise.all(
      ['lead', 'slow-1', 'slow-2'].map((agentId) =>
        store.transaction(audited(agentId)).then(
          () => 'committed',
          () => 'failed',
        ),
      ),
    );
    // The batch (the lead went first, alone) is the statement sleeping in the trigger; the lead's,
    // of the same text, may still be running and must not be the one cut.
    await cutSleepingStatement(scratch.url ?? '');
    expect(await outcomes).toEqual(['committed', 'failed', 'failed']);
    // Sent again one by one, each would have slept out the trigger and committed.
    expect(await auditOf('slow-1')).toEqual([]);
    expect(await auditOf('slow-2')).toEqual([]);
    expect(await auditOf('lead')).toHaveLength(1);
  }, 20_000);
});

describeOnPostgres('named statements', (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver, { poolSize: 1 });
  }, 180_000);
  afterAll(() => database.close());

  it('drizzle queries are kept as named statements on their connection, inside transactions too', async () => {
    const store = createStore(database.db);
    const statements = async () => {
      const result = await database.db.execute(sql`select count(*)::int as n from pg_prepared_statements`);
      return Number((result as unknown as Array<{ n: number }>)[0]?.n ?? 0);
    };
    const before = await statements();
    await store.getAgent('agt_none');
    await database.db.select().from(agents).where(eq(agents.name, 'nobody'));
    await store.transaction((tx) => tx.getAgent('agt_none'));
    // One pooled connection: every statement above is now prepared on it (the count query too).
    expect(await statements()).toBeGreaterThanOrEqual(before + 3);
  });

  it('?prepare=false in DATABASE_URL turns them off, for a pooler that cannot keep them', async () => {
    const url = new URL((database as Database & { url: string }).url);
    url.searchParams.set('prepare', 'false');
    const unprepared = await openDatabase({ databaseUrl: url.toString(), dataDir: '', poolSize: 1 });
    try {
      const store = createStore(unprepared.db);
      await store.transaction((tx) => tx.getAgent('agt_none'));
      await unprepared.db.select().from(agents).where(eq(agents.name, 'nobody'));
      const result = await unprepared.db.execute(sql`select count(*)::int as n from pg_prepared_statements`);
      // drizzle's own `.prepare()`d reads are the only named statements left, and none ran here.
      expect(Number((result as unknown as Array<{ n: number }>)[0]?.n)).toBe(0);
    } finally {
      await unprepared.close();
    }
  });
});
