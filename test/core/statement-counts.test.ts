import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlRecorder } from '../../bench/support/sql-trace.js';
import type { Executor } from '../../src/core/executor.js';
import { echoExecutor } from '../../src/executors/echo.js';
import { drivers } from '../support/database.js';
import { startRecordedTwokey, type RecordedTwokey } from '../support/recorded-twokey.js';
import type { TestTwokey } from '../support/twokey.js';

/**
 * The SQL each step of the core cycle sends, counted at the driver (as `npm run bench:statements`
 * does for the chat cycle). Each figure is what the step needs; a change that adds a statement or
 * a transaction to the hot path fails here, and one that saves some updates the figure.
 */
describe.each(drivers)('statements per step of the core cycle (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let running: RecordedTwokey;
  let twokey: TestTwokey;
  let agent: { apiKey: string };

  beforeAll(async () => {
    running = await startRecordedTwokey(driver, recorder);
    twokey = running.twokey;
    agent = await twokey.createAgent('counted');
  });
  afterAll(() => running.close());

  const params = { org: 'acme', plan: 'scale' };

  async function cycle() {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'upgrade_plan', params } });
    expect(proposed.status).toBe(201);
    const id = String(proposed.body.id);
    await twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'test' });
    const committed = await twokey.request('POST', `/v1/proposals/${id}/commit`, {
      apiKey: agent.apiKey,
      headers: { 'x-confirmation-token': String(proposed.body.confirmToken) },
      body: { operation: 'upgrade_plan', params },
    });
    expect(committed.body).toMatchObject({ status: 'committed', outcome: { outcome: 'committed', decidedBy: ['web:alice'] } });
    const viewed = await twokey.request('GET', `/v1/proposals/${id}`, { apiKey: agent.apiKey });
    expect(viewed.body).toMatchObject({ status: 'committed', approvals: [{ approver: 'web:alice' }] });
  }

  /** Runs `step` while recording; its statements and transactions. */
  async function counted(step: () => Promise<unknown>) {
    const { statements, transactions } = await recorder.during(step);
    return { statements: statements.length, transactions, texts: statements.map((s) => s.text) };
  }

  it('propose, approve, commit and read send the statements they need and no more', async () => {
    // Warm: the first request of a window leases the agent's rate-limit block (PostgreSQL).
    await cycle();
    let proposed = { status: 0, body: {} as Record<string, unknown> };
    const propose = await counted(async () => {
      proposed = await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'upgrade_plan', params } });
    });
    const id = String(proposed.body.id);
    const approve = await counted(() => twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'test' }));
    const commit = await counted(() =>
      twokey.request('POST', `/v1/proposals/${id}/commit`, {
        apiKey: agent.apiKey,
        headers: { 'x-confirmation-token': String(proposed.body.confirmToken) },
        body: { operation: 'upgrade_plan', params },
      }),
    );
    const read = await counted(() => twokey.request('GET', `/v1/proposals/${id}`, { apiKey: agent.apiKey }));
    const figures = Object.fromEntries(
      Object.entries({ propose, approve, commit, read }).map(([step, { statements, transactions }]) => [step, { statements, transactions }]),
    );
    expect(figures, JSON.stringify({ propose, approve, commit, read }, null, 1)).toEqual({
      // The key was read by the warm-up cycle: no statement for it any more. The agent's row lock,
      // then the count of its waiting proposals (a statement of its own after the lock, so it sees
      // what the lock holder committed); the proposal's insert and its audit row, one statement sent
      // with the COMMIT (the change notice goes out after commit, on its own connection).
      propose: { statements: 3, transactions: 1 },
      // the lock (with the agent), the approvals; then the approval's insert, the proposal's update
      // and the audit rows, one statement sent with the COMMIT (the row is locked: its update is
      // known without reading it back).
      approve: { statements: 3, transactions: 1 },
      // the same lock and approvals, then the update with its audit row; the answer needs no read after.
      commit: { statements: 3, transactions: 1 },
      // the proposal with its approvals in one statement.
      read: { statements: 1, transactions: 0 },
    });
  });
});

/**
 * The click that completes the quorum of an `on_approve` proposal on a remote executor: approval and
 * execution claim in one transaction, the executor called after it commits, the result in a second.
 */
describe.each(drivers)('an on_approve approval on a remote executor (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let running: RecordedTwokey;
  let twokey: TestTwokey;
  const called: string[] = [];
  const remote: Executor = {
    kind: 'remote',
    run: async (request) => {
      called.push(request.proposalId);
      return { deleted: true };
    },
  };

  beforeAll(async () => {
    running = await startRecordedTwokey(driver, recorder, { executorFor: (operation) => (operation === 'delete_workspace' ? remote : echoExecutor) });
    twokey = running.twokey;
  });
  afterAll(() => running.close());

  it('claims the execution in the transaction that reaches the quorum, and records the result in one statement more', async () => {
    const agent = await twokey.createAgent('remote-caller');
    const proposed = await twokey.request('POST', '/v1/proposals', {
      apiKey: agent.apiKey,
      body: { operation: 'delete_workspace', params: { workspace: 'w1' } },
    });
    const id = String(proposed.body.id);
    await twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'test' });
    const {
      value: decided,
      statements,
      transactions,
    } = await recorder.during(() => twokey.services.proposals.approve(id, { identity: 'web:bob', via: 'test' }));
    expect(decided).toMatchObject({ outcome: 'quorum_reached', proposal: { status: 'committed', result: { deleted: true } } });
    expect(called).toEqual([id]);
    // Approval and claim in one transaction (before, the claim took one of its own, with a lock and
    // a read); then the result, one statement with no BEGIN: the update, and its audit row added
    // only if the update matched.
    expect(transactions).toBe(1);
    // The row is written once in that transaction: the decision and the claim in one update, in the
    // statement that also adds the approval and the audit rows.
    const updates = statements.filter((statement) => statement.inTransaction && statement.text.includes('update "proposals"'));
    expect(updates.map((statement) => statement.text)).toEqual([
      expect.stringMatching(
        /^with updated_0 as \(update "proposals" set "status" = .*"decided_by" = .*"execution_attempts" = .*"lease_until" = .*insert into "approvals"/s,
      ),
    ]);
    const results = statements.filter((statement) => statement.text.startsWith('with finished_execution as (update "proposals"'));
    expect(results.map((statement) => statement.inTransaction)).toEqual([false]);
    const audit = await twokey.services.store.listAudit({ proposalId: id, limit: 20 });
    expect(audit.map((event) => event.type)).toEqual([
      'proposal.created',
      'approval.recorded',
      'approval.recorded',
      'proposal.approved',
      'execution.started',
      'proposal.committed',
    ]);
  });
});

/**
 * AGP `open` execute on the built-in echo business (its order mints a token): with an
 * Idempotency-Key, the key's claim, then one statement with the minted token, the audit row and the
 * key's outcome (the answer to replay). Without a key, that statement without the key. No
 * transaction, and no read of the agent once its key has been read.
 */
describe.each(drivers)('statements of an AGP open execute (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let running: RecordedTwokey;
  let agent: { apiKey: string };

  beforeAll(async () => {
    running = await startRecordedTwokey(driver, recorder);
    agent = await running.twokey.createAgent('agp-counted');
  });
  afterAll(() => running.close());

  const execute = (key: string | null) =>
    running.twokey.request('POST', '/agp/execute', {
      apiKey: agent.apiKey,
      headers: key === null ? {} : { 'idempotency-key': key },
      body: { businessId: 'echo', request: { serviceId: 'order', items: [{ productId: 'echo-widget-1', quantity: 2 }] } },
    });

  /** The statements `step` sends, but the outbox's first pass at start, which may still be claiming meanwhile. */
  async function statementsOf(step: () => Promise<unknown>) {
    const { statements } = await recorder.during(step);
    return statements.filter((statement) => !/^\s*update jobs/.test(statement.text));
  }

  it("claims the key, then writes the minted token, the audit row and the key's outcome in one statement: two statements", async () => {
    expect((await execute('warm')).status).toBe(200);
    let answer = { status: 0, body: {} as Record<string, unknown> };
    const own = await statementsOf(async () => {
      answer = await execute('counted');
    });
    expect(answer.body).toMatchObject({ status: 'succeeded', data: { status: 'pending_confirmation' } });
    const texts = own.map((statement) => statement.text);
    expect(texts, JSON.stringify(texts, null, 1)).toEqual([
      expect.stringMatching(/^insert into "idempotency_keys"/),
      expect.stringMatching(/^with minted_tokens as \(insert into "agp_tokens" .*audit_rows as .*completed as \(\s*update idempotency_keys/s),
    ]);
    expect(own.filter((statement) => statement.inTransaction)).toEqual([]);

    // The same request again: the stored answer, read with the claim's conflict, nothing written.
    let replayed = { status: 0, body: {} as Record<string, unknown>, headers: {} as Record<string, unknown> };
    const replay = await statementsOf(async () => {
      replayed = await execute('counted');
    });
    expect(replayed).toMatchObject({ status: 200, body: answer.body, headers: { 'idempotent-replayed': 'true' } });
    expect(replay.map((statement) => statement.text)).toEqual([
      expect.stringMatching(/^insert into "idempotency_keys"/),
      expect.stringMatching(/^select .* from "idempotency_keys"/s),
    ]);
  });

  it('without an Idempotency-Key, one statement: the minted token and the audit row', async () => {
    let answer = { status: 0, body: {} as Record<string, unknown> };
    const own = await statementsOf(async () => {
      answer = await execute(null);
    });
    expect(answer.body).toMatchObject({ status: 'succeeded', data: { status: 'pending_confirmation' } });
    const texts = own.map((statement) => statement.text);
    expect(texts, JSON.stringify(texts, null, 1)).toEqual([
      expect.stringMatching(/^with minted_tokens as \(insert into "agp_tokens" .*audit_rows as [^]*select 1$/s),
    ]);
  });
});
