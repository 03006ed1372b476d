import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgliteDirectory } from '../../src/db/database.js';
import { auditOnceChained, freePort, PROCESS_TEST_TIMEOUT_MS, runCli, startServerProcess } from '../support/processes.js';
import { existingEmbeddedDatabase } from '../support/embedded-template.js';

// Each CLI call is a new process (tsx compiles, PGlite opens): generous timeouts for a busy machine.
describe('twokey CLI on the embedded database, beside a running server', { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  let dataDir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'twokey-cli-'));
    await existingEmbeddedDatabase(dataDir);
    env = { TWOKEY_DATA_DIR: dataDir, PORT: String(await freePort()), HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATABASE_URL: '', TWOKEY_CONFIG: '' };
  });
  afterAll(async () => {
    // The checkpoint key and directory live beside the data directory.
    for (const path of [dataDir, `${dataDir}.audit-key.pem`, `${dataDir}.audit-checkpoints`]) await rm(path, { recursive: true, force: true });
  });

  it('the quick start: create an agent, propose with HTTP, approve from the CLI, verify the audit log', async () => {
    const server = await startServerProcess(env);
    try {
      // Its output is not a terminal, so start prints no sign-in link (test/console/cli.test.ts has the rest).
      expect(server.output()).not.toContain('tk_link_');
      const created = await runCli(['agents', 'create', 'argus', '--owner', 'web:owner'], env);
      expect(created.code).toBe(0);
      const lines = created.stdout.trim().split('\n');
      const apiKey = lines.at(-1) ?? '';
      expect(apiKey).toMatch(/^tk_agent_[A-Za-z0-9_-]{43}$/);
      expect(created.stdout).toMatch(/whsec_[A-Za-z0-9+/]{43}=/);

      const proposed = await fetch(`${server.url}/v1/proposals`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } }),
      }).then((r) => r.json() as Promise<{ id: string; summary: string; confirmToken: string }>);
      expect(proposed.summary).toContain('argus is requesting to upgrade acme to the scale plan');
      expect(proposed.confirmToken).toMatch(/^tk_conf_/);

      const listed = await runCli(['proposals', 'list', '--status', 'pending'], env);
      expect(listed.stdout).toContain(proposed.id);

      const owner = await runCli(['proposals', 'approve', proposed.id, '--as', 'web:owner'], env);
      expect(owner.code).toBe(1);
      expect(owner.stderr).toContain('cannot decide');

      const approved = await runCli(['proposals', 'approve', proposed.id, '--as', 'web:operator'], env);
      expect(approved.code).toBe(0);
      expect(approved.stdout).toContain('status committed');

      const view = await fetch(`${server.url}/v1/proposals/${proposed.id}`, { headers: { authorization: `Bearer ${apiKey}` } }).then(
        (r) => r.json() as Promise<{ status: string; result: { echoed: boolean } }>,
      );
      expect(view).toMatchObject({ status: 'committed', result: { echoed: true } });

      const jobs = await runCli(['jobs', 'list', '--status', 'dead'], env);
      expect(jobs).toMatchObject({ code: 0, stdout: '(none)\n' });
      const badStatus = await runCli(['jobs', 'list', '--status', 'zombie'], env);
      expect(badStatus.code).toBe(1);
      expect(badStatus.stderr).toContain('--status must be one of');

      const verified = await runCli(['audit', 'verify'], env);
      expect(verified).toMatchObject({ code: 0 });
      expect(verified.stdout).toMatch(/audit chain ok: \d+ rows/);

      const types = (await auditOnceChained(env)).map((event) => event.type).filter((type) => !type.startsWith('console.'));
      expect(types).toEqual(['agent.created', 'proposal.created', 'approval.recorded', 'proposal.approved', 'proposal.committed']);
      expect(server.output()).not.toContain(apiKey);
      expect(server.output()).not.toContain(proposed.confirmToken);
    } finally {
      await server.stop();
    }
  });

  it('a second server on the same data directory refuses to start, naming the problem', async () => {
    const server = await startServerProcess(env);
    try {
      const second = await runCli(['serve'], { ...env, PORT: String(await freePort()) });
      expect(second.code).toBe(2);
      expect(second.stderr).toContain('in use by another twokey process');
    } finally {
      await server.stop();
    }
  });

  it('audit verify --checkpoints warns loudly and exits 3 without a pinned key, and passes with one', async () => {
    const checkpoints = `${dataDir}.audit-checkpoints`;
    // The key beside the data is all there is: whoever rewrote the table could have replaced it.
    const unpinned = await runCli(['audit', 'verify', '--checkpoints', checkpoints], env);
    expect(unpinned.code).toBe(3);
    expect(unpinned.stdout).toMatch(/audit chain ok: \d+ rows verified, consistent with \d+ signed checkpoint/);
    expect(unpinned.stderr).toContain('WARNING: NO PINNED PUBLIC KEY');
    expect(unpinned.stderr).toContain(`read from ${dataDir}.audit-key.pem`);

    const key = (await runCli(['audit', 'key'], env)).stdout.trim();
    const pinned = await runCli(['audit', 'verify', '--checkpoints', checkpoints, '--public-key', key], env);
    expect(pinned.code).toBe(0);
    expect(pinned.stderr).not.toContain('WARNING');
    const pinnedByEnv = await runCli(['audit', 'verify', '--checkpoints', checkpoints], { ...env, TWOKEY_AUDIT_PUBLIC_KEY: key });
    expect(pinnedByEnv.code).toBe(0);

    // The chain alone passes quietly (docs/audit.md says what it does not prove).
    const chainOnly = await runCli(['audit', 'verify'], env);
    expect(chainOnly.code).toBe(0);
    expect(chainOnly.stderr).toBe('');
  });

  it('audit verify names the first tampered row, and the log refuses plain UPDATE and DELETE', async () => {
    const db = new PGlite(pgliteDirectory(dataDir));
    try {
      const { rows } = await db.query<{ count: number }>('select count(*)::int as count from audit_events');
      expect(rows[0]?.count).toBeGreaterThanOrEqual(3);
      await expect(db.query(`update audit_events set actor = 'mallory' where seq = 3`)).rejects.toThrow(/append-only/);
      await expect(db.query(`delete from audit_events where seq = 3`)).rejects.toThrow(/append-only/);
      // Someone with the database owner's rights can still switch the trigger off: the chain catches that.
      await db.exec(`alter table audit_events disable trigger audit_events_append_only;
        update audit_events set actor = 'web:mallory' where seq = 3;
        alter table audit_events enable trigger audit_events_append_only;`);
    } finally {
      await db.close();
    }
    const verified = await runCli(['audit', 'verify'], env);
    expect(verified.code).toBe(1);
    expect(verified.stdout).toContain('BROKEN at row seq 3');
  });

  it('a bad environment value stops start naming the variable', async () => {
    const result = await runCli(['serve'], { ...env, PORT: 'eighty' });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('PORT');
  });
});
