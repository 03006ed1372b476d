import { Command, MemorySaver } from '@langchain/langgraph';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Agent, run, setTracingDisabled } from '@openai/agents';
import { generateText, stepCountIs } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twokeyTool as aiSdkTool } from '@twokey/client/ai-sdk';
import { resumeWhenDecided } from '@twokey/client/langgraph';
import { twokeyTool as agentsTool } from '@twokey/client/openai-agents';
import { Twokey } from '@twokey/client';
import { startConsoleTwokey, type ConsoleTwokey } from '../console/support.js';
import { connectClient, until } from '../mcp/support.js';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { CALL_AGAIN, CallAgainAgentsModel, callAgainAiSdkModel } from './fixtures/call-again-models.js';
import { refundGraph } from './fixtures/langgraph-graph.js';
import { refundAgentGraph } from './fixtures/langgraph-agent-graph.js';

setTracingDisabled(true);

/**
 * Every way an agent reaches twokey — the AI SDK, the OpenAI Agents SDK, LangGraph (each through its
 * real package, with a scripted model that obeys "call this tool again with the same arguments") and
 * MCP (through the real SDK client) — against a running twokey on a real database, whose operations
 * call a downstream service over HTTP that counts what it is asked to do by Idempotency-Key. One
 * logical call is one request to a human and one execution; the next call after a committed one is
 * a new request, never a replayed "done".
 */

const SECRET = 'exactly-once-downstream-secret-0123';

const refundOperation = (name: string, commit: 'on_approve' | 'agent', url: string) => `
  - name: ${name}
    description: Refund a customer's order
    confirmationType: payment
    params:
      type: object
      required: [order, amount_cents]
      properties:
        order: { type: string }
        amount_cents: { type: integer, minimum: 1 }
    summary: "{{agent}} wants to refund {{params.amount_cents | usd}} on order {{params.order}}."
    approval:
      approvers: [web:operator]
    commit: ${commit}
    executor: { type: http, url: "${url}/${name}", secret: "${SECRET}", timeout: 5s }
`;

type Structured = { outcome: string; proposalId: string };
const structured = (result: unknown) => (result as CallToolResult).structuredContent as Structured;
const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe.each(drivers)('one logical call, one request, one execution, from every way in (%s)', (driver) => {
  let downstream: FakeDownstream;
  let twokey: ConsoleTwokey;
  let client: Twokey;
  let apiKey: string;
  let operator: { cookie: string; csrf: string };

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    const configYaml = `operations:${refundOperation('refund', 'on_approve', downstream.url)}${refundOperation('refund_by_agent', 'agent', downstream.url)}`;
    // MCP answers "pending" at once: the model's repeat is what finds the decision.
    twokey = await startConsoleTwokey({ driver, listen: true, configYaml, env: { TWOKEY_MCP_WAIT: '0' } });
    ({ apiKey } = await twokey.createAgent('shopbot'));
    client = new Twokey({ baseUrl: twokey.baseUrl, apiKey });
    operator = await twokey.signIn('operator');
  }, 120_000);
  afterAll(async () => {
    await twokey.close();
    await downstream.close();
  });

  /** Every proposal of this order, oldest first: what humans were asked. */
  const proposalsFor = async (order: string) =>
    (await twokey.services.store.listProposals({ limit: 1000 })).filter((proposal) => proposal.params['order'] === order).reverse();

  /** What the downstream service was asked to do for this order, by Idempotency-Key. */
  function executionsFor(order: string): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const request of downstream.requests) {
      const params = request.body['params'] as Record<string, unknown> | undefined;
      if (params?.['order'] === order) counts[request.idempotencyKey ?? '(none)'] = (counts[request.idempotencyKey ?? '(none)'] ?? 0) + 1;
    }
    return counts;
  }

  /** The human: approves the pending request of this order in the console, and waits until it has run (or, under `commit: agent`, is approved). */
  async function approvePending(order: string, settledStatus: 'committed' | 'approved' = 'committed') {
    const pending = await until(async () => (await proposalsFor(order)).find((proposal) => proposal.status === 'pending'));
    const answer = await twokey.form(`/console/proposals/${pending.id}/approve`, { _csrf: operator.csrf, return: '/console' }, { cookie: operator.cookie });
    expect(answer.status).toBe(303);
    await until(async () => (await twokey.services.proposals.get(pending.id)).status === settledStatus);
    return pending.id;
  }

  it('AI SDK: the human approves while the model thinks; the repeated call (a new tool call id) gets that request and its result', async () => {
    const order = 'ord_ai_1';
    const { model, toolCalls } = callAgainAiSdkModel('refund', { order, amount_cents: 1250 }, { beforeRepeat: () => approvePending(order) });
    const result = await generateText({
      model,
      tools: { refund: aiSdkTool({ client, operation: 'refund', waitMs: 200 }) },
      prompt: `Refund order ${order}`,
      stopWhen: stepCountIs(6),
    });
    expect(toolCalls()).toBe(2);
    expect(result.steps[0]?.toolResults[0]?.output).toMatchObject({ outcome: { outcome: 'pending' } });
    expect(result.steps[1]?.toolResults[0]?.output).toMatchObject({ outcome: { outcome: 'committed' }, result: { applied: true } });
    expect(result.text).toContain('Approved by web:operator and done');
    const [only, ...others] = await proposalsFor(order);
    expect(others).toHaveLength(0);
    expect(executionsFor(order)).toEqual({ [only!.id]: 1 });

    // The user asks for the same refund again: a new request to the human, a second execution.
    const again = callAgainAiSdkModel('refund', { order, amount_cents: 1250 }, { beforeRepeat: () => approvePending(order) });
    const second = await generateText({
      model: again.model,
      tools: { refund: aiSdkTool({ client, operation: 'refund', waitMs: 200 }) },
      prompt: `Refund order ${order} once more`,
      stopWhen: stepCountIs(6),
    });
    expect(second.text).toContain('Approved by web:operator and done');
    const both = await proposalsFor(order);
    expect(both.map((proposal) => proposal.status)).toEqual(['committed', 'committed']);
    expect(executionsFor(order)).toEqual({ [both[0]!.id]: 1, [both[1]!.id]: 1 });
  });

  it('AI SDK, commit: agent: the repeated call gets the approved request back with its token and commits it once', async () => {
    const order = 'ord_ai_agent';
    const { model } = callAgainAiSdkModel('refund_by_agent', { order, amount_cents: 700 }, { beforeRepeat: () => approvePending(order, 'approved') });
    const result = await generateText({
      model,
      tools: { refund_by_agent: aiSdkTool({ client, operation: 'refund_by_agent', waitMs: 200 }) },
      prompt: `Refund order ${order}`,
      stopWhen: stepCountIs(6),
    });
    expect(result.text).toContain('Approved by web:operator and done');
    const [only, ...others] = await proposalsFor(order);
    expect(others).toHaveLength(0);
    expect(only?.status).toBe('committed');
    expect(executionsFor(order)).toEqual({ [only!.id]: 1 });
  });

  it('OpenAI Agents SDK: the repeated call gets the same request; the next run after it committed is a new request', async () => {
    const order = 'ord_oa_1';
    const agentFor = (model: CallAgainAgentsModel) =>
      new Agent({ name: 'shopbot', instructions: 'Refund when asked.', model, tools: [agentsTool({ client, operation: 'refund', waitMs: 200 })] });
    const model = new CallAgainAgentsModel('refund', { order, amount_cents: 4200 }, { beforeRepeat: () => approvePending(order) });
    const result = await run(agentFor(model), `Refund ${order}`);
    expect(model.calls).toBe(2);
    expect(result.finalOutput).toContain('Approved by web:operator and done');
    const [only, ...others] = await proposalsFor(order);
    expect(others).toHaveLength(0);
    expect(executionsFor(order)).toEqual({ [only!.id]: 1 });

    const again = new CallAgainAgentsModel('refund', { order, amount_cents: 4200 }, { beforeRepeat: () => approvePending(order) });
    expect((await run(agentFor(again), `Refund ${order} once more`)).finalOutput).toContain('Approved by web:operator and done');
    const both = await proposalsFor(order);
    expect(both).toHaveLength(2);
    expect(executionsFor(order)).toEqual({ [both[0]!.id]: 1, [both[1]!.id]: 1 });
  });

  it('LangGraph: one request per node call; the same refund again in the thread, and a different one, are new requests', async () => {
    const graph = refundGraph(client, new MemorySaver());
    const config = { configurable: { thread_id: `thread-refunds-${driver}` } };
    const order = 'ord_lg_1';
    const refundOnce = async (amount_cents: number) => {
      const paused = await graph.invoke({ order, amount_cents }, config);
      expect(paused).toMatchObject({ __interrupt__: [{ value: { twokey: { operation: 'refund' } } }] });
      const resuming = resumeWhenDecided(client, graph, config, { waitMs: 20_000 });
      await approvePending(order);
      return resuming;
    };
    const first = await refundOnce(3100);
    expect(first?.output).toMatchObject({ refunded: true, report: expect.stringContaining('Approved by web:operator and done') });
    // The same refund asked again in the same conversation pauses on a new request; it is not the first one's "done".
    const second = await refundOnce(3100);
    expect(second?.decision.proposalId).not.toBe(first?.decision.proposalId);
    // A different refund in the same thread is its own request too.
    const third = await refundOnce(900);
    const all = await proposalsFor(order);
    expect(all.map((proposal) => proposal.id)).toEqual([first?.decision.proposalId, second?.decision.proposalId, third?.decision.proposalId]);
    expect(Object.values(executionsFor(order))).toEqual([1, 1, 1]);
  });

  it('LangGraph agent loop: a tool turn told to call again, repeated as a new task, finds the same request', async () => {
    const graph = refundAgentGraph(client, new MemorySaver(), { resumedWaitMs: 200 });
    const config = { configurable: { thread_id: `thread-agent-${driver}` } };
    const order = 'ord_lg_agent';
    await graph.invoke({ order, amount_cents: 2500 }, config);
    const [asked] = await proposalsFor(order);
    // Resumed before anyone decided: the tool answers "call again", the agent calls it again, it pauses again.
    const poked = await graph.invoke(new Command({ resume: 'poke' }), config);
    expect(poked.toolAnswers.at(-1)).toContain(CALL_AGAIN);
    expect(poked).toMatchObject({ __interrupt__: [{ value: { twokey: { proposalId: asked!.id } } }] });
    const resuming = resumeWhenDecided(client, graph, config, { waitMs: 20_000 });
    await approvePending(order);
    const resumed = await resuming;
    expect(resumed?.output.finalText).toContain('Approved by web:operator and done');
    expect((await proposalsFor(order)).map((proposal) => proposal.id)).toEqual([asked!.id]);
    expect(executionsFor(order)).toEqual({ [asked!.id]: 1 });
  });

  describe('MCP', () => {
    let mcp: Client;
    beforeAll(async () => {
      mcp = await connectClient(`${twokey.baseUrl}/mcp`, apiKey);
    });
    afterAll(() => mcp.close());

    it('the call repeated after "call again" gets the same request and its result; the next call after it committed is a new request', async () => {
      const order = 'ord_mcp_1';
      const args = { order, amount_cents: 5100 };
      const first = await mcp.callTool({ name: 'refund', arguments: args });
      expect(textOf(first)).toContain(CALL_AGAIN);
      await approvePending(order);
      const repeated = await mcp.callTool({ name: 'refund', arguments: { amount_cents: 5100, order } });
      expect(structured(repeated)).toMatchObject({ outcome: 'committed', proposalId: structured(first).proposalId });
      expect(executionsFor(order)).toEqual({ [structured(first).proposalId]: 1 });

      const next = await mcp.callTool({ name: 'refund', arguments: args });
      expect(structured(next)).toMatchObject({ outcome: 'pending' });
      expect(structured(next).proposalId).not.toBe(structured(first).proposalId);
      expect(await proposalsFor(order)).toHaveLength(2);
    });

    it('an MCP call and an AI SDK tool call with the same arguments are one request, whichever came first', async () => {
      const order = 'ord_shared';
      const args = { order, amount_cents: 800 };
      const viaMcp = await mcp.callTool({ name: 'refund', arguments: args });
      expect(structured(viaMcp)).toMatchObject({ outcome: 'pending' });
      const { model } = callAgainAiSdkModel('refund', args, { beforeRepeat: () => approvePending(order) });
      const viaAiSdk = await generateText({
        model,
        tools: { refund: aiSdkTool({ client, operation: 'refund', waitMs: 200 }) },
        prompt: `Refund order ${order}`,
        stopWhen: stepCountIs(6),
      });
      expect(viaAiSdk.steps[0]?.toolResults[0]?.output).toMatchObject({ proposalId: structured(viaMcp).proposalId });
      expect(viaAiSdk.text).toContain('Approved by web:operator and done');
      expect((await proposalsFor(order)).map((proposal) => proposal.id)).toEqual([structured(viaMcp).proposalId]);
      expect(executionsFor(order)).toEqual({ [structured(viaMcp).proposalId]: 1 });
    });
  });
});
