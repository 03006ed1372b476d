import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { drivers, openTestDatabase } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { auditOnceChained, freePort, PROCESS_TEST_TIMEOUT_MS, runCli, startServerProcess } from '../support/processes.js';

const SECRET = 'crash-downstream-secret-0001';

describe.each(drivers)('kill -9 while the executor holds the request (%s)', (driver) => {
  let downstream: FakeDownstream;
  let dir: string;
  let env: Record<string, string>;
  let closeDatabase = async () => {};

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    dir = await mkdtemp(join(tmpdir(), 'twokey-crash-'));
    const configPath = join(dir, 'twokey.yaml');
    await writeFile(
      configPath,
      `operations:
  - name: send_mailing
    description: Send a mailing
    params: { type: object, required: [list], properties: { list: { type: string } } }
    summary: "{{agent}} wants to mail {{params.list}}."
    approval: { approvers: ["web:alice"], quorum: 1 }
    commit: agent
    executor: { type: http, url: "${downstream.url}/send", secret: "${SECRET}", timeout: 2s }
`,
    );
    let databaseUrl = '';
    if (driver === 'postgres') {
      const database = await openTestDatabase('postgres');
      databaseUrl = database.url ?? '';
      closeDatabase = () => database.close();
    }
    env = { TWOKEY_CONFIG: configPath, TWOKEY_DATA_DIR: join(dir, 'data'), DATABASE_URL: databaseUrl, HOST: '127.0.0.1', LOG_LEVEL: 'warn' };
  });
  afterAll(async () => {
    await downstream.close();
    await closeDatabase();
    await rm(dir, { recursive: true, force: true });
  });

  it(
    'after a restart the proposal ends committed, and the downstream saw one effect under one idempotency key',
    async () => {
      const first = await startServerProcess({ ...env, PORT: String(await freePort()) });
      const apiKey = (await runCli(['agents', 'create', 'crashy'], env)).stdout.trim().split('\n').at(-1) ?? '';
      const params = { list: 'customers' };
      const proposed = (await fetch(`${first.url}/v1/proposals`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ operation: 'send_mailing', params }),
      }).then((r) => r.json())) as { id: string; confirmToken: string };
      expect((await runCli(['proposals', 'approve', proposed.id, '--as', 'web:alice'], env)).code).toBe(0);

      downstream.setBehaviour('hang');
      const held = downstream.nextRequest();
      void fetch(`${first.url}/v1/proposals/${proposed.id}/commit`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-confirmation-token': proposed.confirmToken },
        body: JSON.stringify({ operation: 'send_mailing', params }),
      }).catch(() => undefined);
      expect((await held).idempotencyKey).toBe(proposed.id);

      first.child.kill('SIGKILL');
      const killedAt = performance.now();
      await new Promise((done) => first.child.once('close', done));
      downstream.releaseHanging();
      downstream.setBehaviour('ok');

      const second = await startServerProcess({ ...env, PORT: String(await freePort()) });
      try {
        let status = '';
        await vi.waitFor(
          async () => {
            const view = (await fetch(`${second.url}/v1/proposals/${proposed.id}`, { headers: { authorization: `Bearer ${apiKey}` } }).then((r) =>
              r.json(),
            )) as {
              status: string;
            };
            status = view.status;
            expect(status).toBe('committed');
          },
          { timeout: 30_000, interval: 100 },
        );
        console.log(
          `recovery after kill -9 (${driver}): committed ${((performance.now() - killedAt) / 1000).toFixed(1)} s after the kill (lease = timeout 2 s + 5 s)`,
        );
        const attempts = downstream.requests.filter((r) => r.body.proposalId === proposed.id);
        expect(attempts.length).toBeGreaterThanOrEqual(2);
        expect(new Set(attempts.map((r) => r.idempotencyKey))).toEqual(new Set([proposed.id]));
        expect(downstream.effects.get(proposed.id)?.count).toBe(1);
        const types = (await auditOnceChained(env)).filter((event) => event.proposalId === proposed.id).map((event) => event.type);
        expect(types).toEqual(['proposal.created', 'approval.recorded', 'proposal.approved', 'execution.started', 'execution.resumed', 'proposal.committed']);
      } finally {
        await second.stop();
      }
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
