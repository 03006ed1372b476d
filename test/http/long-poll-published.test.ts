import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SqlRecorder } from '../../bench/support/sql-trace.js';
import type { Executor } from '../../src/core/executor.js';
import { echoExecutor } from '../../src/executors/echo.js';
import { drivers } from '../support/database.js';
import { startRecordedTwokey, type RecordedTwokey } from '../support/recorded-twokey.js';
import { connectClient, listen, until } from '../mcp/support.js';

/**
 * A long-poll held while the proposal executes (or waits for a decision) is woken by the change's
 * commit in this process, and that change is published with the proposal as it left it, its
 * approvals and whether a request identity waits for the agent's answer: the answer is made from
 * them, without reading the proposal back, and is what a read would have given.
 */
describe.each(drivers)('a long-poll woken by a result committed here (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let running: RecordedTwokey;
  let apiKey: string;
  const alice = { identity: 'web:alice', via: 'test' };
  const bob = { identity: 'web:bob', via: 'test' };
  // The remote executor holds each call until the test lets it answer, so the long-poll surely waits.
  const called: string[] = [];
  let answer = () => {};
  const remote: Executor = {
    kind: 'remote',
    run: async (request) => {
      called.push(request.proposalId);
      await new Promise<void>((resolve) => (answer = resolve));
      // Keys in an order jsonb would not keep: the answer is still equal to the stored one.
      return { deleted: true, zone: 'eu' };
    },
  };

  beforeAll(async () => {
    running = await startRecordedTwokey(driver, recorder, {
      executorFor: (operation) => (operation === 'delete_workspace' || operation === 'upgrade_plan' ? remote : echoExecutor),
    });
    ({ apiKey } = await running.twokey.createAgent('waiter'));
  });
  afterAll(() => running.close());

  /** Proposes, approves to the quorum (which claims the execution), and holds a long-poll on the executing proposal. */
  async function waitingThroughExecution(body: Record<string, unknown>) {
    const { twokey } = running;
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body });
    expect(proposed.status).toBe(201);
    const id = String(proposed.body.id);
    await twokey.services.proposals.approve(id, alice);
    const approving = twokey.services.proposals.approve(id, bob);
    await vi.waitFor(() => expect(called).toContain(id));
    const polled = twokey.request('GET', `/v1/proposals/${id}?wait=30&seen=executing:2`, { apiKey });
    await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));
    // What the result's commit and the long-poll's answer send, from the executor's answer on.
    const { value, statements } = await recorder.during(async () => {
      answer();
      await approving;
      return polled;
    });
    return { id, polled: value, texts: statements.map((statement) => statement.text) };
  }

  it('answers committed with the approvals and the result, and reads nothing: the one statement is the result', async () => {
    const { id, polled, texts } = await waitingThroughExecution({ operation: 'delete_workspace', params: { workspace: 'w-published' } });
    expect(polled.status).toBe(200);
    expect(polled.body).toMatchObject({
      status: 'committed',
      approvals: [{ approver: 'web:alice' }, { approver: 'web:bob' }],
      result: { zone: 'eu', deleted: true },
      outcome: { outcome: 'committed', decidedBy: ['web:alice', 'web:bob'] },
    });
    expect(texts, texts.join('\n')).toEqual([expect.stringMatching(/^with finished_execution as \(update "proposals"/)]);
    // The same, byte for byte, as a read of the stored proposal gives (the result's keys in jsonb's order).
    const read = await running.twokey.request('GET', `/v1/proposals/${id}`, { apiKey });
    expect(JSON.stringify(polled.body)).toBe(JSON.stringify(read.body));
  });

  it("answers a request identity's final outcome as seen: the same call again is a new request", async () => {
    const body = { operation: 'delete_workspace', params: { workspace: 'w-once' }, reuse: true };
    const { id, polled, texts } = await waitingThroughExecution(body);
    expect(polled.body).toMatchObject({ id, status: 'committed' });
    // The result, then the identity marked seen; still no read of the proposal.
    expect(texts, texts.join('\n')).toEqual([expect.stringMatching(/^with finished_execution as/), expect.stringMatching(/^update "request_identities"/)]);
    const again = await running.twokey.request('POST', '/v1/proposals', { apiKey, body });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(id);
  });

  it("answers from the claim of the agent's own commit too (commit: agent): the result, the request marked seen, and no read", async () => {
    const { twokey } = running;
    const params = { org: 'own-commit', plan: 'pro' };
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params, reuse: true } });
    const id = String(proposed.body.id);
    await twokey.services.proposals.approve(id, alice);
    // The commit claims the execution under the proposal's row lock, then calls the executor.
    const committing = twokey.request('POST', `/v1/proposals/${id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': String(proposed.body.confirmToken) },
      body: { operation: 'upgrade_plan', params },
    });
    await vi.waitFor(() => expect(called).toContain(id));
    const polled = twokey.request('GET', `/v1/proposals/${id}?wait=30&seen=executing:1`, { apiKey });
    await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));
    const { value, statements } = await recorder.during(async () => {
      answer();
      expect((await committing).body).toMatchObject({ status: 'committed' });
      return polled;
    });
    expect(value.body).toMatchObject({ status: 'committed', approvals: [{ approver: 'web:alice' }], result: { zone: 'eu', deleted: true } });
    const texts = statements.map((statement) => statement.text);
    expect(texts, texts.join('\n')).toEqual([expect.stringMatching(/^with finished_execution as/), expect.stringMatching(/^update "request_identities"/)]);
  });

  /** A pending proposal (two approvals needed) and a long-poll held on it. */
  async function waitingForDecision(body: Record<string, unknown>) {
    const { twokey } = running;
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body });
    const id = String(proposed.body.id);
    const polled = twokey.request('GET', `/v1/proposals/${id}?wait=30&seen=pending:0`, { apiKey });
    await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));
    return { id, polled };
  }

  it("answers with an approval made here (one of two) from the decision's change: nothing outside the decision's transaction", async () => {
    const { id, polled } = await waitingForDecision({ operation: 'delete_workspace', params: { workspace: 'w-counted' } });
    const { value, statements } = await recorder.during(async () => {
      await running.twokey.services.proposals.approve(id, alice);
      return polled;
    });
    expect(value.body).toMatchObject({ status: 'pending', approvals: [{ approver: 'web:alice' }] });
    expect(statements.filter((statement) => !statement.inTransaction).map((statement) => statement.text)).toEqual([]);
    const read = await running.twokey.request('GET', `/v1/proposals/${id}`, { apiKey });
    expect(JSON.stringify(value.body)).toBe(JSON.stringify(read.body));
  });

  it('answers with a rejection made here from its change, marking the request seen: the one statement outside its transaction', async () => {
    const { id, polled } = await waitingForDecision({ operation: 'delete_workspace', params: { workspace: 'w-rejected' }, reuse: true });
    const { value, statements } = await recorder.during(async () => {
      await running.twokey.services.proposals.reject(id, bob, 'not today');
      return polled;
    });
    expect(value.body).toMatchObject({ status: 'rejected', decision: { by: 'web:bob', reason: 'not today' }, approvals: [] });
    const outside = statements.filter((statement) => !statement.inTransaction).map((statement) => statement.text);
    expect(outside, outside.join('\n')).toEqual([expect.stringMatching(/^update "request_identities"/)]);
  });

  it('answers an MCP call waiting through the execution from the same change, marking its request seen, and reads nothing', async () => {
    const { twokey } = running;
    const client = await connectClient(await listen(twokey), apiKey);
    try {
      const progress: string[] = [];
      const call = client.callTool({ name: 'delete_workspace', arguments: { workspace: 'w-mcp' } }, undefined, {
        timeout: 30_000,
        onprogress: (update) => progress.push(update.message ?? ''),
      });
      const proposal = await until(async () =>
        (await twokey.services.store.listProposals({ operation: 'delete_workspace', limit: 100 })).find((p) => p.params.workspace === 'w-mcp'),
      );
      await twokey.services.proposals.approve(proposal.id, alice);
      const approving = twokey.services.proposals.approve(proposal.id, bob);
      await vi.waitFor(() => expect(called).toContain(proposal.id));
      // Told it runs: the call has read the executing proposal and waits for its next change.
      await until(async () => progress.some((message) => message.endsWith('; running')));
      const { value: result, statements } = await recorder.during(async () => {
        answer();
        await approving;
        return (await call) as CallToolResult;
      });
      expect(result.structuredContent).toMatchObject({ outcome: 'committed', decidedBy: ['web:alice', 'web:bob'], result: { zone: 'eu', deleted: true } });
      // The result, then the call's request identity marked seen (an MCP call is one request per
      // call); no read of the proposal.
      const texts = statements.map((statement) => statement.text);
      expect(texts, texts.join('\n')).toEqual([
        expect.stringMatching(/^with finished_execution as \(update "proposals"/),
        expect.stringMatching(/^update "request_identities"/),
      ]);
    } finally {
      await client.close();
    }
  });
});
