import { fileURLToPath } from 'node:url';
import { MemorySaver } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resumeWhenDecided } from '@twokey/client/langgraph';
import { drivers, openTestDatabase } from '../support/database.js';
import { refundGraph } from './fixtures/langgraph-graph.js';
import { runHostProcess, startAdapterHarness, type AdapterHarness } from './support.js';

const hostScript = fileURLToPath(new URL('./fixtures/langgraph-run.ts', import.meta.url));

const host = (args: string[], env: Record<string, string>) => runHostProcess(hostScript, args, env);

describe.each(drivers)('twokey/langgraph with LangGraph (%s)', (driver) => {
  let harness: AdapterHarness;
  beforeAll(async () => {
    harness = await startAdapterHarness(driver);
  });
  afterAll(async () => harness.close());

  it('the node pauses on the proposal, a human approves in the console, the thread resumes with the result; executed once, proposed once', async () => {
    const counters = { nodeRuns: 0 };
    const graph = refundGraph(harness.client, new MemorySaver(), counters);
    const config = { configurable: { thread_id: 'thread-approve' } };
    const before = harness.executions.length;

    const paused = await graph.invoke({ order: 'ord_lg1', amount_cents: 3100 }, config);
    expect(paused).toMatchObject({ __interrupt__: [{ value: { twokey: { operation: 'refund' } } }] });
    const proposalId = await harness.pendingProposal('refund');

    const resuming = resumeWhenDecided(harness.client, graph, config, { waitMs: 20_000 });
    await harness.approve(proposalId);
    const resumed = await resuming;

    expect(resumed?.decision.outcome).toMatchObject({ outcome: 'committed', userConsent: true, proposalId });
    expect(resumed?.output).toMatchObject({ refunded: true, report: expect.stringContaining('Approved by web:operator and done') });
    expect(harness.executions.length - before).toBe(1);
    // The node ran twice (before the pause and on resume) and found the same proposal the second time.
    expect(counters.nodeRuns).toBe(2);
    const refunds = await harness.twokey.services.store.listProposals({ operation: 'refund' });
    expect(refunds.filter((proposal) => proposal.params['order'] === 'ord_lg1')).toHaveLength(1);
  });

  it('a denial resumes the thread with words the model must not work around; nothing runs', async () => {
    const graph = refundGraph(harness.client, new MemorySaver());
    const config = { configurable: { thread_id: 'thread-reject' } };
    const before = harness.executions.length;
    await graph.invoke({ order: 'ord_lg2', amount_cents: 770000 }, config);
    const resuming = resumeWhenDecided(harness.client, graph, config, { waitMs: 20_000 });
    await harness.reject(await harness.pendingProposal('refund'), 'over the limit');
    const resumed = await resuming;
    expect(resumed?.decision.outcome).toMatchObject({ outcome: 'denied', userConsent: false, retryable: false });
    expect(resumed?.output).toMatchObject({
      refunded: false,
      report: 'Denied by web:operator: over the limit. The action did not happen; do not retry it or work around it.',
    });
    expect(harness.executions.length).toBe(before);
  });

  it('resuming a thread that is not paused on twokey does nothing', async () => {
    const graph = refundGraph(harness.client, new MemorySaver());
    expect(await resumeWhenDecided(harness.client, graph, { configurable: { thread_id: 'never-ran' } })).toBeNull();
  });
});

// The checkpointer that survives a process exit is LangGraph's PostgreSQL one; it needs PostgreSQL.
describe.skipIf(!process.env.TEST_DATABASE_URL)('twokey/langgraph across processes (PostgreSQL checkpointer)', () => {
  it('the thread pauses in one process, a human approves after it exited, a new process resumes; executed once', async () => {
    const harness = await startAdapterHarness('postgres');
    const checkpoints = await openTestDatabase('postgres');
    try {
      const env = { TWOKEY_URL: harness.baseUrl, TWOKEY_AGENT_KEY: harness.apiKey, CHECKPOINT_DATABASE_URL: checkpoints.url ?? '' };
      const started = await host(['start', 'thread-cross', 'ord_lg3', '1500'], env);
      expect(started.interrupts).toEqual([
        expect.objectContaining({ value: expect.objectContaining({ twokey: expect.objectContaining({ operation: 'refund' }) }) }),
      ]);
      expect(harness.executions).toHaveLength(0);

      await harness.approve(await harness.pendingProposal('refund'));
      const resumed = await host(['resume', 'thread-cross'], env);
      expect(resumed).toMatchObject({ outcome: 'committed', state: { refunded: true, order: 'ord_lg3' } });
      expect(harness.executions).toHaveLength(1);
    } finally {
      await checkpoints.close();
      await harness.close();
    }
  }, 180_000);
});
