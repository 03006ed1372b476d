import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Agent, run, setTracingDisabled } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twokeyTool } from '@twokey/client/openai-agents';
import { drivers } from '../support/database.js';
import { ScriptedToolModel } from './fixtures/openai-agents-model.js';
import { runHostProcess, startAdapterHarness, type AdapterHarness } from './support.js';

setTracingDisabled(true);

const hostScript = fileURLToPath(new URL('./fixtures/openai-agents-run.ts', import.meta.url));

const host = (args: string[], env: Record<string, string>) => runHostProcess(hostScript, args, env);

describe.each(drivers)('twokey/openai-agents with the OpenAI Agents SDK (%s)', (driver) => {
  let harness: AdapterHarness;
  let downstream: Server;
  let downstreamUrl: string;
  const effects: string[] = [];

  beforeAll(async () => {
    harness = await startAdapterHarness(driver);
    downstream = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        effects.push(body);
        response.end('{}');
      });
    });
    downstream.listen(0, '127.0.0.1');
    await once(downstream, 'listening');
    const address = downstream.address();
    downstreamUrl = typeof address === 'object' && address ? `http://127.0.0.1:${address.port}/` : '';
  });
  afterAll(async () => {
    downstream.close();
    await harness.close();
  });

  const agentWith = (operation: string, input: Record<string, unknown>, callId: string) =>
    new Agent({
      name: 'shopbot',
      instructions: 'Refund when asked.',
      model: new ScriptedToolModel(operation, input, callId),
      tools: [twokeyTool({ client: harness.client, operation })],
    });

  it('the model calls the gated tool, a human approves in the console, the run ends with the result; executed once', async () => {
    const before = harness.executions.length;
    const running = run(agentWith('refund', { order: 'ord_oa1', amount_cents: 4200 }, 'call_oa_approve'), 'Refund ord_oa1');
    await harness.approve(await harness.pendingProposal('refund'));
    const result = await running;
    expect(result.finalOutput).toContain('Approved by web:operator and done');
    expect(result.finalOutput).toContain('"refunded":4200');
    expect(harness.executions.length - before).toBe(1);
  });

  it('a denial ends the run with words the model must not work around; nothing runs', async () => {
    const before = harness.executions.length;
    const running = run(agentWith('refund', { order: 'ord_oa2', amount_cents: 999999 }, 'call_oa_reject'), 'Refund ord_oa2');
    await harness.reject(await harness.pendingProposal('refund'), 'suspicious');
    const result = await running;
    expect(result.finalOutput).toContain('Denied by web:operator: suspicious. The action did not happen; do not retry it or work around it.');
    expect(harness.executions.length).toBe(before);
  });

  it('a repeated call (another call id, the same arguments) finds the same proposal', async () => {
    const gated = twokeyTool({ client: harness.client, operation: 'refund', waitMs: 200 });
    const details = (callId: string) => ({ toolCall: { type: 'function_call' as const, callId, name: 'refund', arguments: '{}' } });
    const first = await gated.invoke({} as never, JSON.stringify({ order: 'ord_oa3', amount_cents: 100 }), details('call_oa_first'));
    const second = await gated.invoke({} as never, JSON.stringify({ amount_cents: 100, order: 'ord_oa3' }), details('call_oa_second'));
    expect(first).toMatch(/^Waiting for approval/);
    expect(second).toBe(first);
    const pending = await harness.twokey.services.store.listProposals({ status: 'pending', operation: 'refund' });
    expect(pending.filter((proposal) => proposal.params['order'] === 'ord_oa3')).toHaveLength(1);
  });

  it('needsApproval: the run pauses in one process, twokey keeps its state, a human approves after that process exited, a new process resumes; the tool ran once', async () => {
    const env = { TWOKEY_URL: harness.baseUrl, TWOKEY_AGENT_KEY: harness.apiKey, DOWNSTREAM_URL: downstreamUrl, REGION: 'eu' };
    const submitted = (await host(['start'], env)) as { proposalIds: string[] };
    expect(submitted.proposalIds).toHaveLength(1);
    expect(effects).toHaveLength(0);

    const [proposalId] = submitted.proposalIds;
    await harness.approve(proposalId!);
    const resumed = await host(['resume', proposalId!], env);
    expect(resumed).toMatchObject({ outcomes: ['committed'], finalOutput: 'The tool said: wiped eu' });
    expect(effects).toEqual([JSON.stringify({ wiped: 'eu' })]);

    // Starting the same run again (same tool call) finds the same, decided proposal: no second request to a human.
    expect(await host(['start'], env)).toEqual(submitted);
  }, 120_000);

  it('needsApproval: a rejection resumes the run with the denial, and the tool never runs', async () => {
    const env = { TWOKEY_URL: harness.baseUrl, TWOKEY_AGENT_KEY: harness.apiKey, DOWNSTREAM_URL: downstreamUrl, REGION: 'us' };
    const before = effects.length;
    const submitted = (await host(['start'], env)) as { proposalIds: string[] };
    const [proposalId] = submitted.proposalIds;
    await harness.reject(proposalId!, 'us traffic peak');
    const resumed = await host(['resume', proposalId!], env);
    expect(resumed.outcomes).toEqual(['denied']);
    expect(resumed.finalOutput).toContain('Denied by web:operator: us traffic peak. The action did not happen');
    expect(effects.length).toBe(before);
  }, 120_000);
});
