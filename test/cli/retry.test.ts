import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { auditOnceChained, freePort, runCli, scratchDataDir, startServerProcess } from '../support/processes.js';
import { existingEmbeddedDatabase } from '../support/embedded-template.js';

const SECRET = 'downstream-secret-0123456789';

// Each CLI call is a new process (tsx compiles, the admin socket answers): generous timeouts.
describe('twokey proposals retry, through the running server’s admin socket', { timeout: 600_000 }, () => {
  let removeDataDir: () => Promise<void>;
  let dataDir: string;
  let downstream: FakeDownstream;
  let env: Record<string, string>;

  beforeAll(async () => {
    ({ dataDir, remove: removeDataDir } = await scratchDataDir('twokey-cli-retry-'));
    await existingEmbeddedDatabase(dataDir);
    downstream = await startFakeDownstream(SECRET);
    const configPath = join(dataDir, 'twokey.config.yaml');
    await writeFile(
      configPath,
      [
        'operations:',
        '  - name: upgrade_plan',
        '    description: Change a plan',
        '    params: { type: object, required: [org], properties: { org: { type: string } } }',
        '    summary: "{{ agent }} upgrades {{ params.org }}"',
        '    approval: { approvers: [web:operator, web:reviewer], quorum: 1 }',
        `    executor: { type: http, url: "${downstream.url}/upgrade", secret: "${SECRET}", timeout: 60s }`,
      ].join('\n'),
    );
    env = { TWOKEY_DATA_DIR: dataDir, TWOKEY_CONFIG: configPath, PORT: String(await freePort()), HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATABASE_URL: '' };
  });
  afterAll(async () => {
    await downstream?.close();
    await removeDataDir();
  });

  it('an approver reruns a failed execution with the same idempotency key; others and bad ids are refused', async () => {
    const server = await startServerProcess(env);
    try {
      const created = await runCli(['agents', 'create', 'argus', '--owner', 'web:owner'], env);
      expect(created).toMatchObject({ code: 0, stderr: '' });
      const apiKey = created.stdout.trim().split('\n').at(-1) ?? '';
      const proposed = (await fetch(`${server.url}/v1/proposals`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ operation: 'upgrade_plan', params: { org: 'acme' } }),
      }).then((response) => response.json())) as { id: string };
      expect(proposed.id).toMatch(/^prp_/);

      downstream.setBehaviour('fail');
      const approved = await runCli(['proposals', 'approve', proposed.id, '--as', 'web:operator'], env);
      expect(approved).toMatchObject({ code: 0, stderr: '' });
      expect(approved.stdout).toContain('status approved');
      expect(approved.stdout).toContain('execution error');

      const failedAgain = await runCli(['proposals', 'retry', proposed.id, '--as', 'web:reviewer'], env);
      expect(failedAgain.code).toBe(1);
      expect(failedAgain.stdout).toContain(`${proposed.id}: status approved`);
      expect(failedAgain.stdout).toContain('execution error');

      const byOwner = await runCli(['proposals', 'retry', proposed.id, '--as', 'web:owner'], env);
      expect(byOwner.code).toBe(1);
      expect(byOwner.stderr).toContain('cannot decide');
      const byNobody = await runCli(['proposals', 'retry', proposed.id, '--as', 'everyone'], env);
      expect(byNobody.code).toBe(1);
      expect(byNobody.stderr).toContain('--as must name one person');
      const unknown = await runCli(['proposals', 'retry', 'prp_unknown', '--as', 'web:operator'], env);
      expect(unknown.code).toBe(1);

      downstream.setBehaviour('ok');
      const retried = await runCli(['proposals', 'retry', proposed.id, '--as', 'web:operator'], env);
      expect(retried.code).toBe(0);
      expect(retried.stdout).toContain(`${proposed.id}: status committed`);
      expect(retried.stdout).toContain('"applied":true');

      // Three calls reached the downstream (two failed, one applied), all with the proposal's key.
      expect(downstream.requests.map((request) => request.idempotencyKey)).toEqual([proposed.id, proposed.id, proposed.id]);
      const view = (await fetch(`${server.url}/v1/proposals/${proposed.id}`, { headers: { authorization: `Bearer ${apiKey}` } }).then((r) => r.json())) as {
        status: string;
      };
      expect(view.status).toBe('committed');

      const events = await auditOnceChained(env);
      expect(events.filter((event) => event.type === 'proposal.committed')).toHaveLength(1);
    } finally {
      await server.stop();
    }
  });
});
