import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { mcpConfigYaml } from './config.js';
import { connectClient, listen, until } from './support.js';

type Structured = { outcome: string; proposalId: string; userConsent: boolean; retryable: boolean; decidedBy: string[]; result: unknown };
const structured = (result: unknown) => (result as CallToolResult).structuredContent as Structured;
const textOf = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe.each(drivers)('MCP over Streamable HTTP (%s)', (driver) => {
  let twokey: TestTwokey;
  let url: string;
  let apiKey: string;
  let client: Client;
  const clients: Client[] = [];

  const connect = async (key = apiKey, capabilities = {}) => {
    const connected = await connectClient(url, key, capabilities);
    clients.push(connected);
    return connected;
  };
  const proposalsOf = async (operation: string) => twokey.services.store.listProposals({ operation, limit: 1000 });

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, configYaml: mcpConfigYaml, env: { TWOKEY_MCP_WAIT: '50', TWOKEY_PUBLIC_URL: 'https://twokey.example' } });
    url = await listen(twokey);
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
    client = await connect();
  }, 120_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await twokey.close();
  });

  it('lists one tool per operation the agent may propose, with its schema, approvers and annotations', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['delete_workspace', 'upgrade_plan']);
    const upgrade = tools.find((tool) => tool.name === 'upgrade_plan');
    expect(upgrade?.inputSchema).toMatchObject({ type: 'object', required: ['org', 'plan'], additionalProperties: false });
    expect(upgrade?.description).toContain('Requires approval by 1 of web:alice, web:bob');
    expect(upgrade?.description).toContain('Slack channel C0APPROVALS');
    expect(upgrade?.description).toContain('expires after 10 min');
    expect(upgrade?.annotations).toMatchObject({ destructiveHint: true, idempotentHint: true, openWorldHint: false, readOnlyHint: false });

    const { apiKey: limitedKey } = await twokey.createAgent('limited', { operations: ['delete_workspace'] });
    const limited = await connect(limitedKey);
    expect((await limited.listTools()).tools.map((tool) => tool.name)).toEqual(['delete_workspace']);
    await expect(limited.callTool({ name: 'upgrade_plan', arguments: { org: 'acme', plan: 'pro' } })).rejects.toThrow(/unknown tool "upgrade_plan"/);
  });

  it('answers 401 in plain JSON without a valid agent key, before any MCP handling', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const missing = await fetch(url, { method: 'POST', headers, body });
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const wrong = await fetch(url, { method: 'POST', headers: { ...headers, authorization: 'Bearer tk_agent_nope' }, body });
    expect(wrong.status).toBe(401);
  });

  it('proposes, reports progress while waiting, and answers with the outcome once a human approves (commit: agent commits for the agent)', async () => {
    const updates: string[] = [];
    let approved = false;
    const call = client.callTool({ name: 'upgrade_plan', arguments: { org: 'acme', plan: 'scale' } }, undefined, {
      timeout: 60_000,
      onprogress: (progress) => {
        updates.push(progress.message ?? '');
        if (!approved) {
          approved = true;
          void (async () => {
            const [proposal] = await proposalsOf('upgrade_plan');
            await twokey.services.proposals.approve(proposal!.id, { identity: 'web:alice', via: 'web' });
          })();
        }
      },
    });
    const result = await call;
    expect(updates[0]).toContain('waiting for approval: 0 of 1');
    expect(result.isError).toBe(false);
    expect(structured(result)).toMatchObject({ outcome: 'committed', userConsent: true, retryable: false, decidedBy: ['web:alice'] });
    expect(structured(result).result).toMatchObject({ echoed: true, params: { org: 'acme', plan: 'scale' } });
    expect(textOf(result)).toContain('Approved by web:alice and done');
    const proposal = await twokey.services.proposals.get(structured(result).proposalId);
    expect(proposal.status).toBe('committed');
    const audit = await twokey.services.store.listAudit({ proposalId: proposal.id });
    expect(audit.find((event) => event.type === 'proposal.committed')?.actor).toBe('agent:argus');
    expect(JSON.stringify(result)).not.toMatch(/tk_conf_/);
  });

  it('refuses arguments that fail the schema as a tool error listing every problem, and proposes nothing', async () => {
    const before = (await proposalsOf('upgrade_plan')).length;
    const result = await client.callTool({ name: 'upgrade_plan', arguments: { org: 7, plan: 'gold', extra: true } });
    expect(result.isError).toBe(true);
    const text = textOf(result);
    expect(text).toContain('/org: must be string');
    expect(text).toContain('/plan: must be one of: pro, scale, enterprise');
    expect(text).toContain('/extra: unknown property');
    expect((await proposalsOf('upgrade_plan')).length).toBe(before);
  });

  it('refuses a twokey token or secret in the arguments', async () => {
    const before = (await proposalsOf('delete_workspace')).length;
    const result = await client.callTool({ name: 'delete_workspace', arguments: { workspace: `tk_conf_${'a'.repeat(43)}` } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('contain a twokey secret');
    expect((await proposalsOf('delete_workspace')).length).toBe(before);
  });

  it('answers an unknown tool with a protocol error', async () => {
    await expect(client.callTool({ name: 'launch_missiles', arguments: {} })).rejects.toThrow(/unknown tool "launch_missiles"/);
  });

  it('reports a denial as final: isError, no consent, words that forbid a retry; calling again returns the same denial', async () => {
    const args = { workspace: 'denied-one' };
    const call = client.callTool({ name: 'delete_workspace', arguments: args }, undefined, {
      timeout: 60_000,
      onprogress: () => {
        void (async () => {
          const proposal = (await proposalsOf('delete_workspace')).find((p) => p.params['workspace'] === 'denied-one' && p.status === 'pending');
          if (proposal) await twokey.services.proposals.reject(proposal.id, { identity: 'web:bob', via: 'web' }, 'not today').catch(() => undefined);
        })();
      },
    });
    const result = await call;
    expect(result.isError).toBe(true);
    expect(structured(result)).toMatchObject({ outcome: 'denied', userConsent: false, retryable: false, decidedBy: ['web:bob'] });
    expect(textOf(result)).toContain('do not retry it or work around it');
    const again = await client.callTool({ name: 'delete_workspace', arguments: args });
    expect(structured(again)).toMatchObject({ outcome: 'denied', proposalId: structured(result).proposalId });
  });

  it('gives two concurrent identical calls from two clients one proposal and one execution', async () => {
    const second = await connect();
    const args = { workspace: 'shared' };
    const calls = [client, second].map((c) => c.callTool({ name: 'delete_workspace', arguments: args }, undefined, { timeout: 60_000 }));
    const proposal = await until(async () => (await proposalsOf('delete_workspace')).find((p) => p.params['workspace'] === 'shared'));
    await until(async () => twokey.mcp.waitingCalls() >= 2);
    await twokey.services.proposals.approve(proposal.id, { identity: 'web:alice', via: 'web' });
    const results = await Promise.all(calls);
    expect(results.map((r) => structured(r).proposalId)).toEqual([proposal.id, proposal.id]);
    expect(results.map((r) => structured(r).outcome)).toEqual(['committed', 'committed']);
    expect((await proposalsOf('delete_workspace')).filter((p) => p.params['workspace'] === 'shared')).toHaveLength(1);
    const audit = await twokey.services.store.listAudit({ proposalId: proposal.id });
    expect(audit.filter((event) => event.type === 'proposal.committed')).toHaveLength(1);
  });

  it('stops waiting when the client cancels, and keeps the proposal: the next identical call gets it', async () => {
    const args = { org: 'cancel-co', plan: 'pro' };
    const abort = new AbortController();
    const call = client.callTool({ name: 'upgrade_plan', arguments: args }, undefined, { signal: abort.signal, timeout: 60_000 });
    const proposal = await until(async () => (await proposalsOf('upgrade_plan')).find((p) => p.params['org'] === 'cancel-co'));
    await until(async () => twokey.mcp.waitingCalls() === 1);
    abort.abort('user pressed stop');
    await expect(call).rejects.toThrow();
    await until(async () => twokey.mcp.waitingCalls() === 0);
    expect((await twokey.services.proposals.get(proposal.id)).status).toBe('pending');
    // Approved while nobody waits: under commit: agent nothing runs until the agent asks again.
    await twokey.services.proposals.approve(proposal.id, { identity: 'web:bob', via: 'web' });
    expect((await twokey.services.proposals.get(proposal.id)).status).toBe('approved');
    const again = await client.callTool({ name: 'upgrade_plan', arguments: args });
    expect(structured(again)).toMatchObject({ outcome: 'committed', proposalId: proposal.id });
  });

  it('stops waiting when the client disconnects mid-wait', async () => {
    const leaving = await connectClient(url, apiKey);
    const call = leaving.callTool({ name: 'delete_workspace', arguments: { workspace: 'gone' } }, undefined, { timeout: 60_000 });
    await until(async () => twokey.mcp.waitingCalls() === 1);
    await leaving.close();
    await expect(call).rejects.toThrow();
    await until(async () => twokey.mcp.waitingCalls() === 0);
    const proposal = (await proposalsOf('delete_workspace')).find((p) => p.params['workspace'] === 'gone');
    expect(proposal?.status).toBe('pending');
  });

  it('refuses a revoked key on the next request', async () => {
    const { apiKey: doomedKey } = await twokey.createAgent('doomed');
    const doomed = await connect(doomedKey);
    expect((await doomed.listTools()).tools.length).toBe(2);
    await twokey.services.agents.revoke('doomed');
    await expect(doomed.listTools()).rejects.toThrow(/was revoked/);
  });

  it('offers the console page of the proposal through URL-mode elicitation when the client supports it', async () => {
    const { apiKey: eliciting } = await twokey.createAgent('eliciting');
    const withUrl = await connect(eliciting, { elicitation: { url: {} } });
    const offered: Array<{ url: string; message: string; mode: string }> = [];
    withUrl.setRequestHandler(ElicitRequestSchema, async (request) => {
      offered.push(request.params as { url: string; message: string; mode: string });
      return { action: 'accept' };
    });
    const call = withUrl.callTool({ name: 'delete_workspace', arguments: { workspace: 'elicited' } }, undefined, { timeout: 60_000 });
    const offer = await until(async () => offered[0]);
    const proposal = (await proposalsOf('delete_workspace')).find((p) => p.params['workspace'] === 'elicited');
    expect(offer).toMatchObject({ mode: 'url', url: `https://twokey.example/console/proposals/${proposal!.id}` });
    expect(offer.message).toContain('eliciting wants to delete workspace elicited.');
    await twokey.services.proposals.approve(proposal!.id, { identity: 'web:alice', via: 'web' });
    expect(structured(await call).outcome).toBe('committed');
    // A client that did not declare URL elicitation is never asked.
    expect(offered).toHaveLength(1);
  });
});

describe.each(drivers)('MCP answers "pending" after TWOKEY_MCP_WAIT (%s)', (driver) => {
  it('answers pending, and the same call again returns the same proposal until it is decided', async () => {
    const twokey = await startTestTwokey({ driver, configYaml: mcpConfigYaml, env: { TWOKEY_MCP_WAIT: '0' } });
    try {
      const url = await listen(twokey);
      const { apiKey } = await twokey.createAgent('argus');
      const client = await connectClient(url, apiKey);
      const args = { org: 'slowco', plan: 'pro' };
      const first = await client.callTool({ name: 'upgrade_plan', arguments: args });
      expect(first.isError).toBe(false);
      expect(structured(first)).toMatchObject({ outcome: 'pending', userConsent: false, retryable: true });
      expect(textOf(first)).toContain('call this tool again with the same arguments');
      const second = await client.callTool({ name: 'upgrade_plan', arguments: { plan: 'pro', org: 'slowco' } });
      expect(structured(second).proposalId).toBe(structured(first).proposalId);
      expect(await twokey.services.store.listProposals({ operation: 'upgrade_plan' })).toHaveLength(1);
      await twokey.services.proposals.approve(structured(first).proposalId, { identity: 'web:alice', via: 'web' });
      const third = await client.callTool({ name: 'upgrade_plan', arguments: args });
      expect(structured(third)).toMatchObject({ outcome: 'committed', proposalId: structured(first).proposalId });
      await client.close();
    } finally {
      await twokey.close();
    }
  }, 120_000);
});

describe.runIf(drivers.includes('postgres'))('MCP on two twokey replicas sharing one PostgreSQL', () => {
  it('answers the calls of one client on either replica with one proposal, and wakes a wait on the other replica', async () => {
    const database = await openTestDatabase('postgres');
    const replicas = [
      await startTestTwokey({ driver: 'postgres', database, configYaml: mcpConfigYaml, env: { TWOKEY_MCP_WAIT: '50' } }),
      await startTestTwokey({ driver: 'postgres', database, configYaml: mcpConfigYaml, env: { TWOKEY_MCP_WAIT: '50' } }),
    ];
    try {
      const urls = await Promise.all(replicas.map(listen));
      const { apiKey } = await replicas[0]!.createAgent('argus');
      const [onFirst, onSecond] = await Promise.all(urls.map((u) => connectClient(u, apiKey)));
      const args = { workspace: 'replicated' };
      const calls = [onFirst!, onSecond!].map((c) => c.callTool({ name: 'delete_workspace', arguments: args }, undefined, { timeout: 60_000 }));
      await until(async () => replicas[0]!.mcp.waitingCalls() === 1 && replicas[1]!.mcp.waitingCalls() === 1);
      const [proposal, ...others] = await replicas[0]!.services.store.listProposals({ operation: 'delete_workspace' });
      expect(others).toHaveLength(0);
      // Decided through the second replica: the first replica's wait wakes through NOTIFY.
      await replicas[1]!.services.proposals.approve(proposal!.id, { identity: 'web:alice', via: 'web' });
      const results = await Promise.all(calls);
      expect(results.map((r) => structured(r))).toMatchObject([
        { outcome: 'committed', proposalId: proposal!.id },
        { outcome: 'committed', proposalId: proposal!.id },
      ]);
      await Promise.all([onFirst!.close(), onSecond!.close()]);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
      await database.close();
    }
  }, 120_000);
});
