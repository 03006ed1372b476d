import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binPath, PROCESS_TEST_TIMEOUT_MS, runCli } from '../support/processes.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { mcpConfigYaml } from './config.js';
import { listen, until } from './support.js';

describe('twokey mcp (stdio, forwarding to a running twokey)', () => {
  let twokey: TestTwokey;
  let base: string;
  let apiKey: string;
  let client: Client;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver: 'pglite', configYaml: mcpConfigYaml, env: { TWOKEY_MCP_WAIT: '50' } });
    base = (await listen(twokey)).replace(/\/mcp$/, '');
    ({ apiKey } = await twokey.createAgent('desktop'));
    client = new Client({ name: 'desktop-client', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [binPath, 'mcp'],
        env: { PATH: process.env.PATH ?? '', TWOKEY_URL: base, TWOKEY_AGENT_KEY: apiKey },
        stderr: 'pipe',
      }),
    );
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await twokey?.close();
  });

  it('lists the same gated tools as /mcp', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['delete_workspace', 'upgrade_plan']);
    expect(tools.find((tool) => tool.name === 'delete_workspace')?.annotations).toMatchObject({ destructiveHint: true, idempotentHint: true });
  });

  it(
    'forwards a call, its progress and its outcome once a human approves',
    async () => {
      const progress: string[] = [];
      const call = client.callTool({ name: 'delete_workspace', arguments: { workspace: 'desk' } }, undefined, {
        timeout: 90_000,
        onprogress: (update) => progress.push(update.message ?? ''),
      });
      const proposal = await until(async () => (await twokey.services.store.listProposals({ operation: 'delete_workspace', status: 'pending' }))[0]);
      await until(async () => progress.length > 0);
      await twokey.services.proposals.approve(proposal.id, { identity: 'web:alice', via: 'web' });
      const result = (await call) as CallToolResult;
      expect(result.structuredContent).toMatchObject({ outcome: 'committed', proposalId: proposal.id, decidedBy: ['web:alice'] });
      expect(progress[0]).toContain('waiting for approval');
    },
    PROCESS_TEST_TIMEOUT_MS,
  );

  it('passes tool errors and protocol errors through', async () => {
    const bad = (await client.callTool({ name: 'upgrade_plan', arguments: { org: 'acme' } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect((bad.content[0] as { text: string }).text).toContain('/plan: is required');
    await expect(client.callTool({ name: 'nope', arguments: {} })).rejects.toThrow(/unknown tool "nope"/);
  });

  it(
    'refuses to start with a wrong key or without one, saying why on stderr',
    async () => {
      const wrong = await runCli(['mcp'], { TWOKEY_URL: base, TWOKEY_AGENT_KEY: 'tk_agent_wrong' });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toContain('twokey mcp: cannot use');
      expect(wrong.stdout).toBe('');
      const missing = await runCli(['mcp'], { TWOKEY_URL: base, TWOKEY_AGENT_KEY: '' });
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain('set TWOKEY_AGENT_KEY');
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
