import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRecordedDatabase, SqlRecorder } from '../../bench/support/sql-trace.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const readsOfAgentByKey = (recorder: SqlRecorder) =>
  recorder.statements.filter((statement) => /from "agents" where "agents"\."key_hash"/.test(statement.text)).length;

/**
 * An agent's key is read from the database once, then taken from memory, and a revocation empties
 * that memory at once: the revoked key's next request is refused.
 */
describe.each(drivers)('the key cache (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let scratch: (Database & { url?: string }) | null = null;
  let recorded: Database;
  let twokey: TestTwokey;

  beforeAll(async () => {
    scratch = driver === 'postgres' ? await openTestDatabase('postgres', { poolSize: 1 }) : null;
    recorded = await openRecordedDatabase(scratch?.url, recorder);
    twokey = await startTestTwokey({ driver, database: recorded, outboxPollMs: 600_000, sweepIntervalMs: 600_000, auditIntervalMs: 3_600_000 });
  }, 120_000);
  afterAll(async () => {
    await twokey.close();
    await recorded.close();
    await scratch?.close();
  });

  const operations = (apiKey: string) => twokey.request('GET', '/v1/operations', { apiKey });

  it('reads a key once for many requests, and refuses it at once after its revocation', async () => {
    const { apiKey } = await twokey.createAgent('cached');
    recorder.recording = true;
    for (let i = 0; i < 5; i += 1) expect((await operations(apiKey)).status).toBe(200);
    expect(readsOfAgentByKey(recorder)).toBe(1);

    await twokey.services.agents.revoke('cached');
    const refused = await operations(apiKey);
    recorder.recording = false;
    expect(refused).toMatchObject({ status: 401, body: { error: { code: 'unauthorized', message: expect.stringContaining('revoked') } } });
    expect(readsOfAgentByKey(recorder)).toBe(2);
  });

  it('keeps refusing a revoked key, reading it every time', async () => {
    const { apiKey } = await twokey.createAgent('gone');
    expect((await operations(apiKey)).status).toBe(200);
    await twokey.services.agents.revoke('gone');
    recorder.statements.length = 0;
    recorder.recording = true;
    for (let i = 0; i < 3; i += 1) expect((await operations(apiKey)).status).toBe(401);
    recorder.recording = false;
    expect(readsOfAgentByKey(recorder)).toBe(3);
  });
});

/** Another replica (another process on the same database) learns of a revocation from the revocation's own notification. */
describeOnPostgres('the key cache across replicas', (driver) => {
  let shared: Database & { url?: string };
  let secondDatabase: Database;
  let first: TestTwokey;
  let second: TestTwokey;

  beforeAll(async () => {
    shared = await openTestDatabase(driver);
    secondDatabase = await openDatabase({ databaseUrl: shared.url, dataDir: '', poolSize: 2 });
    first = await startTestTwokey({ driver, database: shared });
    second = await startTestTwokey({ driver, database: secondDatabase });
  }, 120_000);
  afterAll(async () => {
    await second.close();
    await first.close();
    await secondDatabase.close();
    await shared.close();
  });

  it('refuses a key another replica revoked, though this one had it in memory', async () => {
    const { apiKey } = await first.createAgent('fleet-agent');
    expect((await second.request('GET', '/v1/operations', { apiKey })).status).toBe(200);
    await first.services.agents.revoke('fleet-agent');
    // The notification arrives after the commit, on the second replica's listening connection.
    await expect.poll(async () => (await second.request('GET', '/v1/operations', { apiKey })).status, { timeout: 10_000, interval: 20 }).toBe(401);
  });

  it('forgets every key when it subscribes again (a revocation may have been missed meanwhile)', async () => {
    const { apiKey } = await first.createAgent('missed');
    expect((await second.request('GET', '/v1/operations', { apiKey })).status).toBe(200);
    // A revocation whose notification this replica never got: the row alone, as if sent while it was disconnected.
    await shared.client!.unsafe(`update agents set revoked_at = now() where name = 'missed'`);
    expect((await second.request('GET', '/v1/operations', { apiKey })).status).toBe(200);
    // The listening connections drop; each replica subscribes again, and forgets what it held.
    await shared.client!.unsafe(
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query ilike 'listen %' and pid <> pg_backend_pid()`,
    );
    await expect.poll(async () => (await second.request('GET', '/v1/operations', { apiKey })).status, { timeout: 8_000, interval: 50 }).toBe(401);
  });
});
