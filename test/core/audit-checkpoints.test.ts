import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditHash, genesisHash, indexCheckpoints, publicKeyFromText, publicKeyText, type AuditCheckpoint } from '../../src/core/audit-chain.js';
import { createSigner, parseAuditKey } from '../../src/audit/key.js';
import { readCheckpoints } from '../../src/audit/sinks.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import type { Db } from '../../src/db/database.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, TEST_AUDIT_KEY, type TestTwokey } from '../support/twokey.js';

const trustedKey = publicKeyText(createSigner(parseAuditKey(TEST_AUDIT_KEY)).publicKey);

const rowsOf = async (db: Db) => {
  const result = await db.execute(
    sql`select id, seq, at, type, actor, proposal_id, agent_id, data, prev_hash, hash from audit_events where seq is not null order by seq`,
  );
  return (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Array<Record<string, any>>;
};

/**
 * The attacker owns the table: disables the append-only trigger, edits, and recomputes every later
 * hash so that the chain alone verifies again.
 */
async function rewriteAndRechain(db: Db, edit: () => Promise<unknown>): Promise<void> {
  await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
  await edit();
  let previous = genesisHash;
  for (const row of await rowsOf(db)) {
    const hash = auditHash({
      prevHash: previous,
      at: new Date(row.at),
      type: row.type,
      actor: row.actor,
      proposalId: row.proposal_id,
      agentId: row.agent_id,
      data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data,
    });
    await db.execute(sql`update audit_events set prev_hash = ${previous}, hash = ${hash} where id = ${row.id}`);
    previous = hash;
  }
  await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);
}

describe.each(drivers)('signed audit checkpoints (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;
  let approvedId: string;

  const verify = (args: Record<string, unknown> = {}) =>
    runAdminOperation(twokey.services, 'audit.verify', { checkpoints: twokey.checkpointDir, publicKeys: [trustedKey], ...args }) as Promise<
      Record<string, any>
    >;

  const propose = async (workspace: string) => {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace } } });
    expect(response.status).toBe(201);
    return response.body.id as string;
  };

  const webhook: AuditCheckpoint[] = [];
  let receiver: Server;

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        webhook.push(JSON.parse(body) as AuditCheckpoint);
        response.writeHead(204).end();
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const { port } = receiver.address() as AddressInfo;
    twokey = await startTestTwokey({ driver, env: { TWOKEY_AUDIT_WEBHOOK_URL: `http://127.0.0.1:${port}/checkpoints` } });
    ({ apiKey } = await twokey.createAgent('audited'));
    approvedId = await propose('alpha');
    await runAdminOperation(twokey.services, 'proposals.approve', { id: approvedId, as: 'web:alice' });
    for (const name of ['beta', 'gamma']) await propose(name);
    await twokey.audit.flush();
  }, 180_000);
  afterAll(async () => {
    await twokey.close();
    receiver.close();
  });

  it('rows are inserted without a place in the chain; the integrator places them once, in commit order, and publishes a signed checkpoint', async () => {
    const id = await propose('delta');
    const [pending] = await twokey.services.store.listAudit({ proposalId: id });
    expect(pending).toMatchObject({ seq: null, hash: null, prevHash: null });
    await twokey.audit.flush();
    const [placed] = await twokey.services.store.listAudit({ proposalId: id });
    expect(placed?.seq).toEqual(expect.any(Number));

    const checkpoints = await readCheckpoints(twokey.checkpointDir);
    const last = checkpoints.at(-1)!;
    expect(last).toMatchObject({ size: placed!.seq, head: placed!.hash, keyId: expect.any(String), signature: expect.any(String) });
    expect(indexCheckpoints(checkpoints, [publicKeyFromText(trustedKey)])).toMatchObject({ ok: true });
    // The key file or environment holds the key; the database holds only signatures.
    const stored = JSON.stringify(await rowsOf(twokey.services.database.db));
    expect(stored).not.toContain(TEST_AUDIT_KEY);
  });

  it('the webhook sink receives the same signed checkpoints as the directory, each verifiable with the public key alone', async () => {
    const fromDirectory = await readCheckpoints(twokey.checkpointDir);
    expect(webhook.map((checkpoint) => checkpoint.size)).toEqual(fromDirectory.map((checkpoint) => checkpoint.size));
    expect(indexCheckpoints(webhook, [publicKeyFromText(trustedKey)])).toMatchObject({ ok: true });
    // Published everywhere, so the database keeps none.
    const kept = await twokey.services.database.db.execute(sql`select count(*)::int as count from audit_checkpoints`);
    expect(Number(((Array.isArray(kept) ? kept : (kept as { rows: unknown[] }).rows) as Array<{ count: number }>)[0]?.count)).toBe(0);
  });

  it('the trigger lets the chain columns be set once and refuses every other change', async () => {
    const db = twokey.services.database.db;
    await expect(db.execute(sql`update audit_events set hash = ${'f'.repeat(64)} where seq = 1`)).rejects.toThrow();
    await expect(db.execute(sql`update audit_events set actor = 'web:mallory' where seq = 1`)).rejects.toThrow();
    await expect(db.execute(sql`delete from audit_events where seq = 1`)).rejects.toThrow();
    await twokey.services.store.transaction((tx) => tx.appendAudit({ type: 'test.note', actor: 'test' }, new Date()));
    await expect(db.execute(sql`update audit_events set actor = 'web:mallory', seq = 999999, prev_hash = 'x', hash = 'y' where seq is null`)).rejects.toThrow();
    await twokey.audit.flush();
  });

  it('an honest log passes verify --checkpoints', async () => {
    expect(await verify()).toMatchObject({ ok: true, checkpoints: expect.any(Number), pending: 0 });
  });

  it('refuses checkpoints signed by a key it was not told to trust', async () => {
    const other = publicKeyText(createSigner(parseAuditKey(Buffer.alloc(32, 9).toString('base64'))).publicKey);
    expect(await verify({ publicKeys: [other] })).toMatchObject({ ok: false, reason: expect.stringContaining('not trusted') });
  });

  it('names the first rewritten row after the approval is re-attributed to web:mallory and every later hash recomputed', async () => {
    const db = twokey.services.database.db;
    const [approval] = (await rowsOf(db)).filter((row) => row.proposal_id === approvedId && row.actor === 'web:alice');
    expect(approval).toBeDefined();
    await rewriteAndRechain(db, () => db.execute(sql`update audit_events set actor = 'web:mallory' where id = ${approval!.id}`));
    // The chain alone is fooled: that is what the checkpoints are for.
    expect(await twokey.services.audit.verify()).toMatchObject({ ok: true });
    expect(await verify()).toMatchObject({ ok: false, seq: Number(approval!.seq), reason: expect.stringContaining('differs from the checkpoint') });
    await rewriteAndRechain(db, () => db.execute(sql`update audit_events set actor = 'web:alice' where id = ${approval!.id}`));
    expect(await verify()).toMatchObject({ ok: true });
  });

  it('names a row that was swapped with its neighbour', async () => {
    const db = twokey.services.database.db;
    await rewriteAndRechain(db, async () => {
      await db.execute(sql`update audit_events set seq = -2 where seq = 2`);
      await db.execute(sql`update audit_events set seq = 2 where seq = 3`);
      await db.execute(sql`update audit_events set seq = 3 where seq = -2`);
    });
    expect(await verify()).toMatchObject({ ok: false, seq: 2 });
    await rewriteAndRechain(db, async () => {
      await db.execute(sql`update audit_events set seq = -2 where seq = 2`);
      await db.execute(sql`update audit_events set seq = 2 where seq = 3`);
      await db.execute(sql`update audit_events set seq = 3 where seq = -2`);
    });
    expect(await verify()).toMatchObject({ ok: true });
  });

  it('reports a deleted tail that the chain alone cannot see', async () => {
    const db = twokey.services.database.db;
    const rows = await rowsOf(db);
    const size = rows.length;
    await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
    await db.execute(sql`delete from audit_events where seq > ${size - 2}`);
    await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);
    expect(await twokey.services.audit.verify()).toMatchObject({ ok: true });
    expect(await verify()).toMatchObject({ ok: false, seq: size - 1, reason: expect.stringContaining('gone from the table') });
  });

  it('reads one file as well as a directory, and rejects a file that is not checkpoints with a clear error', async () => {
    const file = join(twokey.checkpointDir, 'checkpoints.jsonl');
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AuditCheckpoint);
    expect(lines.length).toBeGreaterThan(0);
    await expect(
      runAdminOperation(twokey.services, 'audit.verify', { checkpoints: join(twokey.checkpointDir, 'nope.jsonl'), publicKeys: [trustedKey] }),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(runAdminOperation(twokey.services, 'audit.verify', { checkpoints: file })).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
