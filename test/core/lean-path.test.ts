import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRecordedDatabase, SqlRecorder } from '../../bench/support/sql-trace.js';
import type { ExecutionRequest, Executor } from '../../src/core/executor.js';
import { echoExecutor } from '../../src/executors/echo.js';
import { eventually } from '../discord/helpers.js';
import { manualClock } from '../support/clock.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { configYaml, payoutOperation, refundOperation, RULE_APPROVED_NOTE } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * A call a policy rule approves at propose time with `commit: on_approve` needs no human: it is
 * decided, claimed and (for a local executor) run in the transaction that inserts it, and a remote
 * executor's result is recorded in one more. The guarantees are the human path's: the same audit
 * rows, the executor's idempotency key, recovery of a claim whose process died, callbacks.
 */

const config = configYaml([
  // Approved by its rule: runs on the remote executor below.
  refundOperation({ approvers: ['web:alice'], commit: 'on_approve', policy: [{ when: 'params.amount_cents <= 2000', decide: 'approve', reason: 'small' }] }),
  // No rule: a person approves it, and it runs on the same remote executor.
  payoutOperation({ approvers: ['web:alice'], commit: 'on_approve' }),
  // Approved by its rule, run by the local echo executor.
  RULE_APPROVED_NOTE,
]);

/** A remote executor whose calls the test sees; it can hold the next call (one that never answers: its process died). */
function remoteExecutor() {
  const calls: ExecutionRequest[] = [];
  let holdNext = false;
  const held: Array<() => void> = [];
  let failing = false;
  const executor: Executor = {
    kind: 'remote',
    async run(request) {
      calls.push(request);
      if (holdNext) {
        holdNext = false;
        await new Promise<void>((resume) => held.push(resume));
      }
      if (failing) throw new Error('the downstream said no');
      return { done: request.proposalId };
    },
  };
  return {
    executor,
    calls,
    fail: (on: boolean) => {
      failing = on;
    },
    holdNext: () => {
      holdNext = true;
    },
    release: () => {
      for (const resume of held.splice(0)) resume();
    },
  };
}

/** Callbacks as an agent's receiver gets them. */
async function callbackReceiver() {
  const received: Array<{ id: string; status: string }> = [];
  const server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const parsed = JSON.parse(body) as { proposal: { id: string; status: string } };
      received.push({ id: parsed.proposal.id, status: parsed.proposal.status });
      response.writeHead(200).end('{}');
    });
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    close: () => new Promise<void>((closed) => server.close(() => closed())),
  };
}

describe.each(drivers)('a call a rule approves, on the lean path (%s)', (driver) => {
  const clock = manualClock();
  const recorder = new SqlRecorder();
  const remote = remoteExecutor();
  let scratch: Awaited<ReturnType<typeof openTestDatabase>> | null = null;
  let recorded: Awaited<ReturnType<typeof openRecordedDatabase>>;
  let twokey: TestTwokey;
  let agent: { apiKey: string; id: string };
  let receiver: Awaited<ReturnType<typeof callbackReceiver>>;

  beforeAll(async () => {
    receiver = await callbackReceiver();
    scratch = driver === 'postgres' ? await openTestDatabase('postgres', { poolSize: 1 }) : null;
    recorded = await openRecordedDatabase(scratch?.url, recorder);
    twokey = await startTestTwokey({
      driver,
      database: recorded,
      clock,
      configYaml: config,
      executorFor: (operation) => (operation === 'note' ? echoExecutor : remote.executor),
      sweepIntervalMs: 600_000,
      auditIntervalMs: 3_600_000,
    });
    agent = await twokey.createAgent('lean');
  });
  afterAll(async () => {
    remote.release();
    await twokey?.close();
    await recorded?.close();
    await scratch?.close();
    await receiver?.close();
  });

  /** The transactions `step` runs, counted at the driver. */
  async function transactionsOf(step: () => Promise<unknown>): Promise<number> {
    return (await recorder.during(step)).transactions;
  }

  const auditTypes = async (proposalId: string) => (await twokey.services.store.listAudit({ proposalId })).map((event) => event.type);

  it('runs a rule-approved call on a remote executor once, in two statements with no BEGIN, audited like a person-approved one', async () => {
    // Warm (the first request of a window leases the agent's rate-limit block).
    await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'refund', params: { amount_cents: 1 } } });
    remote.calls.length = 0;

    const {
      value: answer,
      statements,
      transactions,
    } = await recorder.during(() =>
      twokey.request('POST', '/v1/proposals', {
        apiKey: agent.apiKey,
        body: { operation: 'refund', params: { amount_cents: 500 }, callbackUrl: receiver.url },
      }),
    );
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({ status: 'committed', outcome: { outcome: 'committed', decidedBy: ['policy:refund#0'] } });
    const id = String(answer.body.id);
    // The decision, the claim and the start of the execution: one statement, which commits by itself
    // (no BEGIN: it reads nothing first). The result: one more, its update first.
    const own = statements.filter((statement) => /^with (new_proposals as \(insert into|finished_execution as \(update) "proposals"/.test(statement.text));
    expect(own.map((statement) => [statement.text.slice(5, 22), statement.inTransaction])).toEqual([
      ['new_proposals as ', false],
      ['finished_executio', false],
    ]);
    expect(transactions).toBe(0);
    expect(remote.calls.map((call) => call.proposalId)).toEqual([id]);
    expect(remote.calls[0]).toMatchObject({ approvedBy: ['policy:refund#0'], params: { amount_cents: 500 } });

    const human = await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'payout', params: { amount_cents: 500 } } });
    await twokey.services.proposals.approve(String(human.body.id), { identity: 'web:alice', via: 'test' });
    expect((await twokey.services.proposals.get(String(human.body.id))).status).toBe('committed');
    // The same rows as a person's approval, less the person's own approval row.
    const humanTypes = (await auditTypes(String(human.body.id))).filter((type) => type !== 'approval.recorded');
    expect(await auditTypes(id)).toEqual(humanTypes);
    expect(await auditTypes(id)).toEqual(['proposal.created', 'proposal.approved', 'execution.started', 'proposal.committed']);
    const approved = (await twokey.services.store.listAudit({ proposalId: id })).find((event) => event.type === 'proposal.approved');
    expect(approved).toMatchObject({ actor: 'policy:refund#0', data: { via: 'policy', reason: 'small' } });

    // Visible where every proposal is, and the agent's receiver hears the final state.
    const viewed = await twokey.request('GET', `/v1/proposals/${id}`, { apiKey: agent.apiKey });
    expect(viewed.body).toMatchObject({ status: 'committed', result: { done: id } });
    expect((await twokey.services.store.listProposals({ agentId: agent.id })).map((proposal) => proposal.id)).toContain(id);
    await eventually(() => expect(receiver.received).toContainEqual({ id, status: 'committed' }));
    expect(receiver.received.filter((callback) => callback.id === id)).toHaveLength(1);
  });

  it('runs a rule-approved call on a local executor in one transaction of one statement, begun before the executor runs', async () => {
    // Warm: the agent's key is read once, then held in memory.
    await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'note', params: { text: 'warm' } } });
    let answer = { status: 0, body: {} as Record<string, unknown> };
    const transactions = await transactionsOf(async () => {
      answer = await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'note', params: { text: 'hi' } } });
    });
    expect(answer.body).toMatchObject({ status: 'committed', outcome: { outcome: 'committed', decidedBy: ['policy:note#0'] } });
    expect(transactions).toBe(1);
    // No agent lock (a rule decided: the proposal never waits), the executor run before the insert,
    // and the row, as decided and executed, with its audit rows: one statement, sent with the COMMIT.
    // (Outside the request, the outbox and the sweeper may poll meanwhile: only the request's own statements are looked at.)
    const ownStatements = recorder.statements.filter((statement) => /proposals|"agents"/.test(statement.text) && !/^\s*update jobs/.test(statement.text));
    expect(ownStatements.map((statement) => statement.text)).toEqual([
      expect.stringMatching(/^with new_proposals as \(insert into "proposals" .*audit_rows as/s),
    ]);
    expect(await auditTypes(String(answer.body.id))).toEqual(['proposal.created', 'proposal.approved', 'proposal.committed']);
  });

  it('resumes a claim whose process died before the result, once, with the same idempotency key', async () => {
    remote.calls.length = 0;
    remote.holdNext();
    // The call never answers: as if the process had died after the claim committed.
    const stuck = twokey.services.proposals.propose((await twokey.services.store.getAgent(agent.id))!, { operation: 'refund', params: { amount_cents: 700 } });
    await eventually(() => expect(remote.calls).toHaveLength(1));
    const id = remote.calls[0]!.proposalId;
    expect(await twokey.services.store.getProposal(id)).toMatchObject({ status: 'executing', executionAttempts: 1 });

    // Within the lease nothing is taken over.
    expect(await twokey.services.proposals.resumeStaleExecutions()).toBe(0);
    clock.advance(10 * 60_000);
    expect(await twokey.services.proposals.resumeStaleExecutions()).toBe(1);
    expect(await twokey.services.proposals.resumeStaleExecutions()).toBe(0);
    expect(remote.calls.map((call) => call.proposalId)).toEqual([id, id]);
    expect(await twokey.services.store.getProposal(id)).toMatchObject({ status: 'committed', executionAttempts: 2, result: { done: id } });
    // The first call's late answer records nothing more.
    remote.release();
    await stuck;
    expect(await auditTypes(id)).toEqual(['proposal.created', 'proposal.approved', 'execution.started', 'execution.resumed', 'proposal.committed']);
  });

  it('records a failed run as approved with the error, the token still good for a retry', async () => {
    remote.fail(true);
    try {
      const answer = await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'refund', params: { amount_cents: 900 } } });
      expect(answer.status).toBe(201);
      expect(answer.body).toMatchObject({ status: 'approved', outcome: { outcome: 'failed' } });
      const id = String(answer.body.id);
      expect(await twokey.services.store.getProposal(id)).toMatchObject({
        status: 'approved',
        error: 'the downstream said no',
        consumedAt: null,
        executionAttempts: 1,
      });
      expect(await auditTypes(id)).toEqual(['proposal.created', 'proposal.approved', 'execution.started', 'execution.failed']);
    } finally {
      remote.fail(false);
    }
  });

  it('leaves a call over the rule to a person: nothing runs', async () => {
    remote.calls.length = 0;
    const answer = await twokey.request('POST', '/v1/proposals', { apiKey: agent.apiKey, body: { operation: 'refund', params: { amount_cents: 5000 } } });
    expect(answer.body).toMatchObject({ status: 'pending' });
    expect(await auditTypes(String(answer.body.id))).toEqual(['proposal.created']);
    expect(remote.calls).toEqual([]);
  });
});
