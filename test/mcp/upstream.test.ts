import { fileURLToPath } from 'node:url';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { createUpstreamClients, withUpstreamOperations } from '../../src/mcp/upstreams.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { connectClient, listen, startFakeUpstream, until, type FakeUpstream } from './support.js';

const UPSTREAM_TOKEN = 'upstream-token-0123456789abcdef';
const stdioFixture = fileURLToPath(new URL('./fixtures/stdio-notes.ts', import.meta.url));

const configFor = (upstreamUrl: string) => `
operations:
  - name: archive_note
    description: Archive a note on the stdio notes server
    params:
      type: object
      required: [name]
      properties:
        name: { type: string }
    summary: "{{agent}} wants to archive note {{params.name}}."
    approval:
      approvers: [web:alice]
    executor:
      type: mcp
      command: ${JSON.stringify(process.execPath)}
      args: ["--import", "tsx", ${JSON.stringify(stdioFixture)}]
      env: { NOTES_SECRET: stdio-upstream-secret-value }
      tool: archive_note
upstreams:
  - name: notes
    url: ${upstreamUrl}
    headers: { authorization: "Bearer ${UPSTREAM_TOKEN}" }
    # Long enough for the fake to serialise its 8 MB answer on a busy machine.
    timeout: 10s
    maxResponseBytes: 1048576
    approval:
      approvers: [web:alice, web:bob]
    tools:
      read_note: { readOnly: true }
      delete_note:
        summary: "{{agent}} wants to delete the note {{params.name}}."
`;

type Structured = { outcome: string; proposalId: string; retryable: boolean; decidedBy: string[]; reason: string | null; result: unknown };
const structured = (result: unknown) => (result as CallToolResult).structuredContent as Structured;

describe.each(drivers)('MCP upstreams and executor type mcp (%s)', (driver) => {
  let upstream: FakeUpstream;
  let twokey: TestTwokey;
  let client: Client;
  let mcpUrl: string;
  let agentKey: string;

  const approveWhenProposed = async (operation: string) => {
    const proposal = await until(async () => (await twokey.services.store.listProposals({ operation, status: 'pending' }))[0]);
    await twokey.services.proposals.approve(proposal.id, { identity: 'web:alice', via: 'web' });
    return proposal;
  };

  beforeAll(async () => {
    upstream = await startFakeUpstream({ token: UPSTREAM_TOKEN });
    twokey = await startTestTwokey({ driver, configYaml: configFor(upstream.url), env: { TWOKEY_MCP_WAIT: '50', NOTES_TOKEN: UPSTREAM_TOKEN } });
    mcpUrl = await listen(twokey);
    const { apiKey } = await twokey.createAgent('argus');
    agentKey = apiKey;
    client = await connectClient(mcpUrl, apiKey);
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await twokey?.close();
    await upstream?.close();
  });

  it("imports the upstream's tools as operations: the ones the config marks read-only pass, the others need approval", async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect([...byName.keys()].sort()).toEqual([
      'archive_note',
      'notes_delete_note',
      'notes_flaky',
      'notes_hang',
      'notes_huge',
      'notes_liar',
      'notes_read_note',
    ]);
    expect(byName.get('notes_read_note')?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, openWorldHint: true });
    expect(byName.get('notes_read_note')?.description).toContain('No human approval');
    expect(byName.get('notes_delete_note')?.annotations).toMatchObject({ destructiveHint: true, idempotentHint: true });
    expect(byName.get('notes_delete_note')?.description).toContain('Requires approval by 1 of web:alice, web:bob');
    expect(byName.get('notes_delete_note')?.inputSchema).toMatchObject({
      type: 'object',
      properties: { name: { type: 'string' } },
      additionalProperties: false,
    });
  });

  it('passes a tool the config marks read-only straight through, audited with the policy as decider', async () => {
    const result = await client.callTool({ name: 'notes_read_note', arguments: { name: 'groceries' } });
    expect(structured(result)).toMatchObject({ outcome: 'committed', decidedBy: ['policy:upstream-readonly'] });
    expect(structured(result).result).toEqual({ content: [{ type: 'text', text: 'milk, eggs' }] });
    const audit = await twokey.services.store.listAudit({ proposalId: structured(result).proposalId });
    expect(audit.map((event) => [event.type, event.actor])).toContainEqual(['proposal.approved', 'policy:upstream-readonly']);
    // Reading twice reads twice: rule-decided calls are not folded into one proposal.
    const again = await client.callTool({ name: 'notes_read_note', arguments: { name: 'groceries' } });
    expect(structured(again).proposalId).not.toBe(structured(result).proposalId);
  });

  it('answers a call no human decides with one JSON body, and streams one that asked for progress or waits for a human', async () => {
    const post = (name: string, meta?: Record<string, unknown>, signal?: AbortSignal) =>
      fetch(mcpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${agentKey}` },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name, arguments: { name: 'groceries' }, ...(meta ? { _meta: meta } : {}) },
        }),
        ...(signal ? { signal } : {}),
      });
    const plain = await post('notes_read_note');
    expect(plain.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await plain.json()).toMatchObject({ id: 7, result: { structuredContent: { outcome: 'committed' } } });
    // A progress token asks for notifications, which only a stream carries.
    const withProgress = await post('notes_read_note', { progressToken: 'p1' });
    expect(withProgress.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await withProgress.text()).toContain('"outcome":"committed"');
    // A human decides: the wait may offer the approval page, a request only a stream carries.
    const leave = new AbortController();
    const waiting = await post('notes_delete_note', undefined, leave.signal);
    expect(waiting.headers.get('content-type')).toMatch(/^text\/event-stream/);
    leave.abort();
    const proposal = await until(async () => (await twokey.services.store.listProposals({ operation: 'notes_delete_note', status: 'pending' }))[0]);
    await twokey.services.proposals.reject(proposal.id, { identity: 'web:alice', via: 'web' });
  });

  it('calls a destructive upstream tool only after approval, with the approved arguments and its credentials, once', async () => {
    const call = client.callTool({ name: 'notes_delete_note', arguments: { name: 'todo' } }, undefined, { timeout: 60_000 });
    const proposal = await approveWhenProposed('notes_delete_note');
    expect(proposal.summary).toBe('argus wants to delete the note todo.');
    const result = await call;
    expect(structured(result)).toMatchObject({ outcome: 'committed', proposalId: proposal.id, result: { deleted: 'todo' } });
    const deletes = upstream.calls.filter((c) => c.tool === 'delete_note');
    expect(deletes).toHaveLength(1);
    expect(deletes[0]).toMatchObject({ args: { name: 'todo' }, meta: { 'io.twokey/idempotency-key': proposal.id } });
    expect(upstream.refused).toBe(0);
  });

  it('records a hanging upstream as a failed, retryable execution after its timeout', async () => {
    const call = client.callTool({ name: 'notes_hang', arguments: { name: 'x' } }, undefined, { timeout: 60_000 });
    await approveWhenProposed('notes_hang');
    const result = await call;
    expect(result.isError).toBe(true);
    expect(structured(result)).toMatchObject({ outcome: 'failed', retryable: true });
    expect(structured(result).reason).toContain('did not answer within 10000 ms');
  }, 60_000);

  it('refuses an 8 MB answer (8× maxResponseBytes) as a failed execution', async () => {
    const call = client.callTool({ name: 'notes_huge', arguments: { name: 'x' } }, undefined, { timeout: 60_000 });
    await approveWhenProposed('notes_huge');
    const result = await call;
    expect(structured(result)).toMatchObject({ outcome: 'failed', retryable: true });
    expect(structured(result).reason).toContain('larger than 1048576 bytes');
  }, 60_000);

  it('records an answer that breaks the tool’s own output schema as a failure', async () => {
    const call = client.callTool({ name: 'notes_liar', arguments: { name: 'x' } }, undefined, { timeout: 60_000 });
    await approveWhenProposed('notes_liar');
    const result = await call;
    expect(structured(result)).toMatchObject({ outcome: 'failed', retryable: true });
    expect(structured(result).reason).toMatch(/output schema|structured content/i);
  }, 60_000);

  it('retries a failed upstream call when the same tool is called again, with the same idempotency key', async () => {
    const call = client.callTool({ name: 'notes_flaky', arguments: { name: 'x' } }, undefined, { timeout: 60_000 });
    const proposal = await approveWhenProposed('notes_flaky');
    const failed = await call;
    expect(structured(failed)).toMatchObject({ outcome: 'failed', proposalId: proposal.id });
    expect(structured(failed).reason).toContain('backend unavailable');
    const retried = await client.callTool({ name: 'notes_flaky', arguments: { name: 'x' } });
    expect(structured(retried)).toMatchObject({ outcome: 'committed', proposalId: proposal.id });
    const attempts = upstream.calls.filter((c) => c.tool === 'flaky');
    expect(attempts.map((c) => c.meta?.['io.twokey/idempotency-key'])).toEqual([proposal.id, proposal.id]);
  }, 60_000);

  it('runs a stdio upstream (executor type mcp with command) with the env the config gives it', async () => {
    const call = client.callTool({ name: 'archive_note', arguments: { name: 'old' } }, undefined, { timeout: 90_000 });
    const proposal = await approveWhenProposed('archive_note');
    const result = await call;
    expect(structured(result)).toMatchObject({
      outcome: 'committed',
      result: { archived: 'old', secretSeen: true, idempotencyKey: proposal.id },
    });
  }, 120_000);
});

describe('importing upstreams at start', () => {
  it('stops start naming the tool when a destructive tool has no approvers, and when the upstream is unreachable', async () => {
    const upstream = await startFakeUpstream({ token: UPSTREAM_TOKEN });
    const clients = createUpstreamClients();
    try {
      const noApprovers = parseConfig(
        `upstreams:\n  - name: notes\n    url: ${upstream.url}\n    headers: { authorization: "Bearer ${UPSTREAM_TOKEN}" }\n`,
        {},
        'x.yaml',
      );
      await expect(withUpstreamOperations(noApprovers, clients)).rejects.toThrow(/tool delete_note: needs approval: set upstreams\[0\]\.approval/);
      const wrongToken = parseConfig(`upstreams:\n  - name: other\n    url: ${upstream.url}\n    approval: { approvers: [web:alice] }\n`, {}, 'x.yaml');
      await expect(withUpstreamOperations(wrongToken, clients)).rejects.toThrow(/upstreams\[0\] \(other\): cannot list its tools/);
      const unknownTool = parseConfig(
        `upstreams:\n  - name: notes\n    url: ${upstream.url}\n    headers: { authorization: "Bearer ${UPSTREAM_TOKEN}" }\n    approval: { approvers: [web:alice] }\n    tools:\n      nuke: { expose: false }\n`,
        {},
        'x.yaml',
      );
      await expect(withUpstreamOperations(unknownTool, clients)).rejects.toThrow(/upstreams\[0\]\.tools\.nuke: notes has no such tool/);
    } finally {
      await clients.closeAll();
      await upstream.close();
    }
  }, 60_000);

  it('refuses a config with both url and command, or neither', () => {
    expect(() => parseConfig('upstreams:\n  - name: a\n    url: http://127.0.0.1:1/mcp\n    command: node\n', {}, 'x.yaml')).toThrow(
      /upstreams\[0\]\.url: expected either url/,
    );
    expect(() => parseConfig('upstreams:\n  - name: a\n', {}, 'x.yaml')).toThrow(/upstreams\[0\]\.url: expected either url/);
  });
});
