import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startAdapterHarness, type AdapterHarness } from '../adapters/support.js';
import { connectClient } from './support.js';

/**
 * The whole story from an MCP client's side, with a person in the loop: the client knows only the
 * twokey URL and an agent key, lists the gated tools, calls one, a human approves (or rejects) on the
 * console's own form, and the call answers with what happened.
 */
describe.each(drivers)('an MCP client with a human deciding in the web console (%s)', (driver) => {
  let harness: AdapterHarness;
  beforeAll(async () => {
    harness = await startAdapterHarness(driver);
  }, 120_000);
  afterAll(async () => harness.close());

  it('lists the gated tools, calls refund, the operator approves in the console, the client gets the result; executed once', async () => {
    const client = await connectClient(`${harness.baseUrl}/mcp`, harness.apiKey, {});
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toContain('refund');

      const before = harness.executions.length;
      const call = client.callTool({ name: 'refund', arguments: { order: 'ord_mcp1', amount_cents: 900 } }, undefined, { timeout: 60_000 });
      await harness.approve(await harness.pendingProposal('refund'));
      const result = (await call) as CallToolResult;

      expect(result.isError).toBe(false);
      expect(result.structuredContent).toMatchObject({ outcome: 'committed', userConsent: true, decidedBy: ['web:operator'], result: { refunded: 900 } });
      expect((result.content[0] as { text: string }).text).toContain('Approved by web:operator and done');
      expect(harness.executions.length - before).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('a rejection in the console reaches the client as a denial it must not work around; nothing runs', async () => {
    const client = await connectClient(`${harness.baseUrl}/mcp`, harness.apiKey, {});
    try {
      const before = harness.executions.length;
      const call = client.callTool({ name: 'refund', arguments: { order: 'ord_mcp2', amount_cents: 123456 } }, undefined, { timeout: 60_000 });
      await harness.reject(await harness.pendingProposal('refund'), 'needs a manager');
      const result = (await call) as CallToolResult;

      expect(result.structuredContent).toMatchObject({ outcome: 'denied', userConsent: false, retryable: false, reason: 'needs a manager' });
      expect((result.content[0] as { text: string }).text).toContain('The action did not happen; do not retry it or work around it.');
      expect(harness.executions.length).toBe(before);
    } finally {
      await client.close();
    }
  });
});
