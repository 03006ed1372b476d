import { generateText, stepCountIs, tool, jsonSchema } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalsPendingError, answerApprovalRequests, twokeyTool, twokeyTools, type TwokeyToolOutput } from '@twokey/client/ai-sdk';
import { drivers } from '../support/database.js';
import { refundingModel } from './scripted-models.js';
import { startAdapterHarness, type AdapterHarness } from './support.js';

describe.each(drivers)('twokey/ai-sdk with the AI SDK (%s)', (driver) => {
  let harness: AdapterHarness;
  beforeAll(async () => {
    harness = await startAdapterHarness(driver);
  });
  afterAll(async () => harness.close());

  it('the model calls the gated refund, a human approves in the console, the run ends with the result; executed once', async () => {
    const before = harness.executions.length;
    const model = refundingModel('refund', { order: 'ord_1', amount_cents: 1250 }, 'call_approve');
    const run = generateText({
      model,
      tools: { refund: twokeyTool({ client: harness.client, operation: 'refund' }) },
      prompt: 'Refund order ord_1',
      stopWhen: stepCountIs(3),
    });
    await harness.approve(await harness.pendingProposal('refund'));
    const result = await run;

    const toolResult = result.steps[0]?.toolResults[0];
    expect(toolResult?.output).toMatchObject({ outcome: { outcome: 'committed', userConsent: true, decidedBy: ['web:operator'] }, result: { refunded: 1250 } });
    expect(result.text).toContain('Approved by web:operator and done');
    expect(harness.executions.length - before).toBe(1);
  });

  it('a denial reaches the model as words it must not work around, and nothing runs', async () => {
    const before = harness.executions.length;
    const model = refundingModel('refund', { order: 'ord_2', amount_cents: 990000 }, 'call_reject');
    const run = generateText({
      model,
      tools: { refund: twokeyTool({ client: harness.client, operation: 'refund' }) },
      prompt: 'Refund order ord_2',
      stopWhen: stepCountIs(3),
    });
    await harness.reject(await harness.pendingProposal('refund'), 'not this much');
    const result = await run;

    expect(result.steps[0]?.toolResults[0]?.output).toMatchObject({
      outcome: { outcome: 'denied', userConsent: false, retryable: false, reason: 'not this much' },
    });
    expect(result.text).toContain('Denied by web:operator: not this much. The action did not happen; do not retry it or work around it.');
    expect(harness.executions.length).toBe(before);
  });

  it('a repeated call (a new tool call id, the same arguments in another order) finds the same proposal and never asks twice', async () => {
    const gated = twokeyTool({ client: harness.client, operation: 'refund', waitMs: 200 });
    const first = (await gated.execute?.({ order: 'ord_3', amount_cents: 500 }, { toolCallId: 'call_first', messages: [] })) as TwokeyToolOutput;
    const second = (await gated.execute?.({ amount_cents: 500, order: 'ord_3' }, { toolCallId: 'call_second', messages: [] })) as TwokeyToolOutput;
    expect(first).toMatchObject({ outcome: { outcome: 'pending' } });
    expect(second.proposalId).toBe(first.proposalId);
    const pending = await harness.twokey.services.store.listProposals({ status: 'pending', operation: 'refund' });
    expect(pending.filter((proposal) => proposal.params['order'] === 'ord_3')).toHaveLength(1);
    expect(first.text).toMatch(/call this tool again with the same arguments/);
  });

  it('the same call in two conversations is two requests', async () => {
    const gated = twokeyTool({
      client: harness.client,
      operation: 'refund',
      waitMs: 100,
      conversation: (execution) => (execution.experimental_context as { chat: string }).chat,
    });
    const inChat = (chat: string, toolCallId: string) =>
      gated.execute?.({ order: 'ord_chat', amount_cents: 300 }, { toolCallId, messages: [], experimental_context: { chat } }) as Promise<TwokeyToolOutput>;
    const [a, b, aAgain] = [await inChat('a', 'call_1'), await inChat('b', 'call_2'), await inChat('a', 'call_3')];
    expect(a.proposalId).not.toBe(b.proposalId);
    expect(aAgain.proposalId).toBe(a.proposalId);
  });

  it('twokeyTools builds one tool per operation with its params schema, and commits `commit: agent` operations itself', async () => {
    const tools = await twokeyTools(harness.client);
    expect(Object.keys(tools).sort()).toEqual(['approve_tool_call', 'refund', 'refund_by_agent']);
    const before = harness.executions.length;
    const model = refundingModel('refund_by_agent', { order: 'ord_4', amount_cents: 700 }, 'call_agent_commit');
    const run = generateText({ model, tools, prompt: 'Refund order ord_4', stopWhen: stepCountIs(3) });
    await harness.approve(await harness.pendingProposal('refund_by_agent'));
    const result = await run;
    expect(result.steps[0]?.toolResults[0]?.output).toMatchObject({ outcome: { outcome: 'committed' }, result: { refunded: 700 } });
    expect(harness.executions.length - before).toBe(1);
  });

  it("answers the AI SDK's own needsApproval requests from twokey's decisions", async () => {
    let ran = 0;
    const wipe = tool({
      description: 'Wipe the cache',
      inputSchema: jsonSchema<{ region: string }>({ type: 'object', properties: { region: { type: 'string' } }, required: ['region'] }),
      needsApproval: true,
      execute: async ({ region }) => {
        ran += 1;
        return `wiped ${region}`;
      },
    });
    const model = refundingModel('wipe', { region: 'eu' }, 'call_wipe');
    const first = await generateText({ model, tools: { wipe }, prompt: 'wipe the eu cache', stopWhen: stepCountIs(3) });
    expect(first.content.some((part) => part.type === 'tool-approval-request')).toBe(true);
    expect(ran).toBe(0);

    const answering = answerApprovalRequests(harness.client, first.content, { operationFor: () => 'approve_tool_call' });
    await harness.approve(await harness.pendingProposal('approve_tool_call'));
    const approvals = await answering;
    expect(approvals?.content).toEqual([expect.objectContaining({ type: 'tool-approval-response', approved: true })]);

    const second = await generateText({
      model,
      tools: { wipe },
      messages: [{ role: 'user', content: 'wipe the eu cache' }, ...first.response.messages, approvals!],
      stopWhen: stepCountIs(3),
    });
    expect(ran).toBe(1);
    expect(second.text).toContain('wiped eu');
  });
  it('needsApproval: an undecided request stays pending (an error saying so, never a denial); answered again once decided, it is approved', async () => {
    const wipe = tool({
      description: 'Wipe the cache',
      inputSchema: jsonSchema<{ region: string }>({ type: 'object', properties: { region: { type: 'string' } }, required: ['region'] }),
      needsApproval: true,
      execute: async ({ region }) => `wiped ${region}`,
    });
    const first = await generateText({
      model: refundingModel('wipe', { region: 'ap' }, 'call_wipe_ap'),
      tools: { wipe },
      prompt: 'wipe ap',
      stopWhen: stepCountIs(3),
    });
    const undecided = answerApprovalRequests(harness.client, first.content, { operationFor: () => 'approve_tool_call', waitMs: 100 });
    await expect(undecided).rejects.toBeInstanceOf(ApprovalsPendingError);
    const error = (await undecided.catch((thrown: unknown) => thrown)) as ApprovalsPendingError;
    expect(error.pending).toEqual([{ approvalId: expect.any(String), proposalId: expect.stringMatching(/^prp_/) }]);

    // Still approvable, and approving it is what the next answer reports.
    await harness.approve(error.pending[0]!.proposalId);
    const answered = await answerApprovalRequests(harness.client, first.content, { operationFor: () => 'approve_tool_call', waitMs: 10_000 });
    expect(answered?.content).toEqual([expect.objectContaining({ type: 'tool-approval-response', approved: true })]);
    const proposals = await harness.twokey.services.store.listProposals({ operation: 'approve_tool_call', limit: 1000 });
    expect(proposals.filter((proposal) => (proposal.params['input'] as { region?: string })['region'] === 'ap')).toHaveLength(1);
  });
});
