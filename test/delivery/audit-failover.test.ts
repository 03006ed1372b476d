import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { runAdminOperation } from '../../src/admin/operations.js';
import { createSigner, parseAuditKey } from '../../src/config/audit-key.js';
import { publicKeyText } from '../../src/core/audit-chain.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { freePort, startServerProcess } from '../support/processes.js';
import { startTestTwokey, TEST_AUDIT_KEY, testConfigYaml, type TestTwokey } from '../support/twokey.js';

/** Whether some session holds the audit integrator's advisory lock ("audl") in this test's database. */
async function auditLockHeld(database: Database): Promise<boolean> {
  // PostgreSQL only (postgres.js): the result is the list of rows.
  const [row] = (await database.db.execute(
    sql`select exists(select 1 from pg_locks where locktype = 'advisory' and granted and classid = 0 and objid = ${0x6175646c}
        and database = (select oid from pg_database where datname = current_database())) as held`,
  )) as unknown as Array<{ held: boolean }>;
  return row?.held === true;
}

describeOnPostgres('audit integrator failover', (driver) => {
  let base: Database & { url?: string };
  let standbyDatabase: Database;
  let standby: TestTwokey;
  let dir: string;

  beforeAll(async () => {
    base = await openTestDatabase(driver);
    dir = await mkdtemp(join(tmpdir(), 'twokey-audit-failover-'));
    await writeFile(join(dir, 'twokey.yaml'), testConfigYaml);
  }, 120_000);
  afterAll(async () => {
    await standby?.close();
    await standbyDatabase?.close();
    await base.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('the integrating replica is killed with rows waiting: the other takes over, places them, and every checkpoint still verifies', async () => {
    const leaderCheckpoints = join(dir, 'leader-checkpoints');
    const leader = await startServerProcess({
      DATABASE_URL: base.url ?? '',
      TWOKEY_CONFIG: join(dir, 'twokey.yaml'),
      TWOKEY_DATA_DIR: join(dir, 'data'),
      TWOKEY_AUDIT_KEY: TEST_AUDIT_KEY,
      TWOKEY_AUDIT_CHECKPOINTS: leaderCheckpoints,
      LOG_LEVEL: 'warn',
      PORT: String(await freePort()),
    });
    const exited = once(leader.child, 'close');
    try {
      // The process must lead before the in-process replica starts, or (on a slow start) the replica
      // would win the election and the failover below would test nothing: wait for its lock.
      await vi.waitFor(async () => expect(await auditLockHeld(base)).toBe(true), { timeout: 60_000, interval: 100 });
      // Started second, so it stands by while the process leads.
      standbyDatabase = await openDatabase({ databaseUrl: base.url ?? '', dataDir: '', poolSize: 5 });
      standby = await startTestTwokey({
        driver,
        database: standbyDatabase,
        auditLeaderRetryMs: 100,
        auditIntervalMs: 50,
        env: { TWOKEY_AUDIT_CHECKPOINTS: join(dir, 'standby-checkpoints') },
      });
      const { apiKey } = await standby.createAgent('failover');
      const propose = async (url: string | null, workspace: string) => {
        const body = { operation: 'delete_workspace', params: { workspace } };
        if (url) {
          const response = await fetch(`${url}/v1/proposals`, {
            method: 'POST',
            headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          expect(response.status).toBe(201);
          return ((await response.json()) as { id: string }).id;
        }
        const response = await standby.request('POST', '/v1/proposals', { apiKey, body });
        expect(response.status).toBe(201);
        return response.body.id as string;
      };

      const early: string[] = [];
      for (let i = 0; i < 10; i += 1) early.push(await propose(leader.url, `early-${i}`));
      // The process leads: it places rows while the in-process replica only stands by.
      await vi.waitFor(async () => expect(await standby.services.auditLog.pendingCount()).toBe(0), { timeout: 20_000, interval: 100 });

      // Freeze the leader (its lock session stays open), queue rows it will never place, then kill it.
      leader.child.kill('SIGSTOP');
      const late: string[] = [];
      for (let i = 0; i < 10; i += 1) late.push(await propose(null, `late-${i}`));
      expect(await standby.services.auditLog.pendingCount()).toBeGreaterThan(0);
      leader.child.kill('SIGKILL');

      await vi.waitFor(async () => expect(await standby.services.auditLog.pendingCount()).toBe(0), { timeout: 30_000, interval: 100 });
      // Rows are placed (and their checkpoint stored) before the checkpoint is written to the
      // directory: let the pass under way finish publishing before reading the directories.
      await standby.audit.flush();
      const trusted = publicKeyText(createSigner(parseAuditKey(TEST_AUDIT_KEY)).publicKey);
      const verdict = (await runAdminOperation(standby.services, 'audit.verify', { checkpoints: dir, publicKeys: [trusted] })) as Record<string, unknown>;
      expect(verdict).toMatchObject({ ok: true, pending: 0 });
      const chain = await standby.services.store.listAudit({ afterSeq: 0, limit: 10_000 });
      expect(verdict.rows).toBe(chain.length);
      for (const id of [...early, ...late]) expect(chain.filter((event) => event.proposalId === id && event.type === 'proposal.created')).toHaveLength(1);
      // Both replicas' checkpoints, read together, cover the whole chain.
      expect(verdict.covered).toBe(chain.length);
    } finally {
      leader.child.kill('SIGKILL');
      await exited;
    }
  }, 180_000);
});
