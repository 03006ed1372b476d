import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { connectClient, listen, startFakeUpstream, until, type FakeUpstream } from './support.js';

const UPSTREAM_TOKEN = 'upstream-token-0123456789abcdef';

const config = (upstreamUrl: string) => `
upstreams:
  - name: notes
    url: ${upstreamUrl}
    headers: { authorization: "Bearer ${UPSTREAM_TOKEN}" }
    approval:
      approvers: [web:alice]
    tools:
      read_note: { readOnly: true }
      flaky: { readOnly: true }
      hang: { readOnly: true }
`;

type Structured = { outcome: string; proposalId: string; result: unknown };
const structured = (result: unknown) => (result as CallToolResult).structuredContent as Structured;

/**
 * A read-only upstream tool needs no claim: repeating a read harms nothing. Its call runs first, and
 * the proposal, its decision, the result and their audit rows are then recorded together, so the
 * pass-through costs one statement beside the upstream call.
 */
describe.each(drivers)('a read-only upstream call is recorded with its answer (%s)', (driver) => {
  let upstream: FakeUpstream;
  let twokey: TestTwokey;
  let client: Client;

  const auditOf = async (proposalId: string) => (await twokey.services.store.listAudit({ proposalId })).map((event) => event.type).sort();

  beforeAll(async () => {
    upstream = await startFakeUpstream({ token: UPSTREAM_TOKEN });
    twokey = await startTestTwokey({ driver, configYaml: config(upstream.url), env: { TWOKEY_MCP_WAIT: '5' } });
    const { apiKey } = await twokey.createAgent('reader');
    client = await connectClient(await listen(twokey), apiKey);
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await twokey?.close();
    await upstream?.close();
  });

  it('records a read as committed, with the proposal id as its idempotency key and no execution claim', async () => {
    const result = await client.callTool({ name: 'notes_read_note', arguments: { name: 'groceries' } });
    const { proposalId } = structured(result);
    expect(structured(result)).toMatchObject({ outcome: 'committed', result: { content: [{ type: 'text', text: 'milk, eggs' }] } });
    expect(upstream.calls.at(-1)).toMatchObject({ tool: 'read_note', meta: { 'io.twokey/idempotency-key': proposalId } });
    expect(await auditOf(proposalId)).toEqual(['proposal.approved', 'proposal.committed', 'proposal.created']);
    const stored = await twokey.services.store.getProposal(proposalId);
    expect(stored).toMatchObject({ status: 'committed', executionAttempts: 1, leaseUntil: null, error: null });
    expect(stored?.consumedAt).toBeInstanceOf(Date);
  });

  it('records nothing while the read is in flight, and the whole call once it answers', async () => {
    const call = client.callTool({ name: 'notes_hang', arguments: { name: 'slow' } });
    await until(async () => upstream.calls.some((c) => c.tool === 'hang'));
    expect(await twokey.services.store.listProposals({ operation: 'notes_hang' })).toEqual([]);
    upstream.releaseHanging();
    const result = await call;
    expect(structured(result)).toMatchObject({ outcome: 'committed', result: { content: [{ type: 'text', text: 'too late' }] } });
    const stored = await twokey.services.store.listProposals({ operation: 'notes_hang' });
    expect(stored.map((p) => [p.id, p.status])).toEqual([[structured(result).proposalId, 'committed']]);
  });

  it('records a failed read as failed, and calling again reads again', async () => {
    const failed = await client.callTool({ name: 'notes_flaky', arguments: { name: 'x' } });
    expect(failed.isError).toBe(true);
    expect(structured(failed)).toMatchObject({ outcome: 'failed' });
    expect(await auditOf(structured(failed).proposalId)).toEqual(['execution.failed', 'proposal.approved', 'proposal.created']);
    expect(await twokey.services.store.getProposal(structured(failed).proposalId)).toMatchObject({
      status: 'approved',
      consumedAt: null,
      executionAttempts: 1,
    });
    const again = await client.callTool({ name: 'notes_flaky', arguments: { name: 'x' } });
    expect(structured(again)).toMatchObject({ outcome: 'committed', result: { content: [{ type: 'text', text: 'ok' }] } });
    expect(structured(again).proposalId).not.toBe(structured(failed).proposalId);
  });
});
