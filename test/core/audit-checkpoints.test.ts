import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  alertSignedBy,
  continuationProblem,
  indexCheckpoints,
  publicKeyFromText,
  publicKeyText,
  type AuditAlert,
  type AuditCheckpoint,
} from '../../src/core/audit-chain.js';
import { createSigner, parseAuditKey } from '../../src/config/audit-key.js';
import { readCheckpoints, readNewestCheckpoint } from '../../src/audit/sinks.js';
import { createCheckpointWitness } from '../../src/audit/witness.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import { rewriteAndRechain, rowsOf } from '../support/audit.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, TEST_AUDIT_KEY, type TestTwokey } from '../support/twokey.js';

const trustedKey = publicKeyText(createSigner(parseAuditKey(TEST_AUDIT_KEY)).publicKey);

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
  const alerts: Array<{ alert: AuditAlert; header: unknown }> = [];
  let receiver: Server;

  beforeAll(async () => {
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        const header = request.headers['twokey-audit-alert'];
        if (header) alerts.push({ alert: JSON.parse(body) as AuditAlert, header });
        else webhook.push(JSON.parse(body) as AuditCheckpoint);
        response.writeHead(204).end();
      });
    });
    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const { port } = receiver.address() as AddressInfo;
    // Passes run only when a test flushes: a background pass (a poll, or on PostgreSQL a wake-up after
    // a commit) could otherwise place rows in the middle of a test's rewrite of the chain.
    twokey = await startTestTwokey({ driver, auditIntervalMs: 3_600_000, env: { TWOKEY_AUDIT_WEBHOOK_URL: `http://127.0.0.1:${port}/checkpoints` } });
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

    // Nor does the integrator sign on top of the rewritten history: it alerts instead.
    const signedBefore = await readNewestCheckpoint(twokey.checkpointDir);
    const id = await propose('during-rewrite');
    await twokey.audit.flush();
    expect(await readNewestCheckpoint(twokey.checkpointDir)).toEqual(signedBefore);
    expect(alerts.at(-1)?.alert).toMatchObject({ kind: 'history_rewritten', signed: { size: signedBefore!.size } });

    await rewriteAndRechain(db, () => db.execute(sql`update audit_events set actor = 'web:alice' where id = ${approval!.id}`));
    await twokey.audit.flush();
    expect((await twokey.services.store.listAudit({ proposalId: id }))[0]?.seq).toEqual(expect.any(Number));
    expect(await verify()).toMatchObject({ ok: true, pending: 0 });
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

  let deletedTail: Array<Record<string, any>> = [];

  it('reports a deleted tail that the chain alone cannot see', async () => {
    const db = twokey.services.database.db;
    const rows = await rowsOf(db);
    const size = rows.length;
    deletedTail = rows.slice(size - 2);
    await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
    await db.execute(sql`delete from audit_events where seq > ${size - 2}`);
    await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);
    expect(await twokey.services.audit.verify()).toMatchObject({ ok: true });
    expect(await verify()).toMatchObject({ ok: false, seq: size - 1, reason: expect.stringContaining('gone from the table') });
  });

  it('signs nothing on top of the shortened chain: an error log line, the metric, and a signed alert to the webhook instead', async () => {
    const signedBefore = await readNewestCheckpoint(twokey.checkpointDir);
    const published = webhook.length;
    const alertsBefore = alerts.length;
    expect(signedBefore?.size).toBe(Number(deletedTail.at(-1)?.seq));
    const id = await propose('epsilon');
    await twokey.audit.flush();

    // Before: a checkpoint of the shorter chain, contradicting the published ones, signed without a word.
    expect(await readNewestCheckpoint(twokey.checkpointDir)).toEqual(signedBefore);
    expect(webhook).toHaveLength(published);
    expect((await twokey.services.store.listAudit({ proposalId: id })).map((event) => event.seq)).toEqual([null]);

    expect(alerts).toHaveLength(alertsBefore + 1);
    const { alert, header } = alerts.at(-1)!;
    expect(header).toBe('tail_deleted');
    expect(alert).toMatchObject({
      origin: 'twokey-audit-alert/v1',
      kind: 'tail_deleted',
      signed: { size: signedBefore!.size, head: signedBefore!.head },
      found: { size: signedBefore!.size - 2, hashAtSignedSize: null },
      message: expect.stringContaining('gone from the table'),
    });
    expect(alertSignedBy(alert, [publicKeyFromText(trustedKey)])).toBe(true);
    expect(alertSignedBy({ ...alert, found: { size: signedBefore!.size, hashAtSignedSize: signedBefore!.head } }, [publicKeyFromText(trustedKey)])).toBe(false);
    const errorLines = twokey.logs.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((line) => line.level === 50);
    expect(errorLines.map((line) => line.msg)).toContainEqual(expect.stringMatching(/^audit integrity alert: the chain ends at row \d+/));
    expect(await twokey.services.metrics.registry.metrics()).toContain('twokey_audit_alerts_total{kind="tail_deleted"} 1');

    // Still refused on the next pass, and not alerted twice for the same conflict.
    await twokey.audit.flush();
    expect(alerts).toHaveLength(alertsBefore + 1);
    expect(await readNewestCheckpoint(twokey.checkpointDir)).toEqual(signedBefore);
  });

  it('carries on once the deleted rows are back', async () => {
    const db = twokey.services.database.db;
    await db.execute(sql`alter table audit_events disable trigger audit_events_append_only`);
    for (const row of deletedTail) {
      await db.execute(sql`insert into audit_events (id, seq, at, type, actor, proposal_id, agent_id, data, prev_hash, hash)
        values (${row.id}, ${row.seq}, ${new Date(row.at).toISOString()}::timestamptz, ${row.type}, ${row.actor}, ${row.proposal_id}, ${row.agent_id},
                ${typeof row.data === 'string' ? row.data : JSON.stringify(row.data)}::jsonb, ${row.prev_hash}, ${row.hash})`);
    }
    await db.execute(sql`alter table audit_events enable trigger audit_events_append_only`);
    await twokey.audit.flush();
    const newest = await readNewestCheckpoint(twokey.checkpointDir);
    expect(newest?.size).toBeGreaterThan(Number(deletedTail.at(-1)?.seq));
    expect(await verify()).toMatchObject({ ok: true, pending: 0 });
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

describe('the newest checkpoint of a directory sink', () => {
  const signer = createSigner(parseAuditKey(TEST_AUDIT_KEY));
  const checkpointOf = (from: number, rows: number): AuditCheckpoint => {
    const hashes = Array.from({ length: rows }, (_, n) => (from + n + 1).toString(16).padStart(64, '0'));
    return signer.sign({
      origin: 'twokey-audit-checkpoint/v1',
      size: from + rows,
      from,
      head: hashes.at(-1)!,
      hashes,
      timestamp: new Date(0).toISOString(),
      keyId: '',
    });
  };

  it('is the last whole line, read from the end: lines longer than a read step, and a torn last line, are handled', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'twokey-newest-'));
    try {
      expect(await readNewestCheckpoint(dir)).toBeNull();
      // 1,500 hashes make a line of ~100 KB: longer than one 64 KB step backwards.
      const older = checkpointOf(0, 3);
      const newest = checkpointOf(3, 1_500);
      const torn = JSON.stringify(checkpointOf(1_503, 2)).slice(0, 80);
      writeFileSync(join(dir, 'checkpoints.jsonl'), `${JSON.stringify(older)}\n${JSON.stringify(newest)}\n${torn}`);
      expect(await readNewestCheckpoint(dir)).toEqual(newest);
      writeFileSync(join(dir, 'checkpoints.jsonl'), `${JSON.stringify(older)}\n`);
      expect(await readNewestCheckpoint(dir)).toEqual(older);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('what the integrator must continue', () => {
  const signed = { size: 42, head: 'a'.repeat(64), timestamp: '2026-11-22T10:00:00.000Z' };

  it('a chain that still holds the signed head at the signed size, and maybe more, continues it', () => {
    expect(continuationProblem(signed, { seq: 42, hash: 'a'.repeat(64) }, 'a'.repeat(64))).toBeNull();
    expect(continuationProblem(signed, { seq: 50, hash: 'b'.repeat(64) }, 'a'.repeat(64))).toBeNull();
  });

  it('a shorter chain lost its tail; another hash at the signed size means the history was rewritten', () => {
    expect(continuationProblem(signed, { seq: 40, hash: 'c'.repeat(64) }, null)).toMatchObject({
      kind: 'tail_deleted',
      message: expect.stringContaining('rows 41…42'),
    });
    expect(continuationProblem(signed, null, null)).toMatchObject({ kind: 'tail_deleted' });
    expect(continuationProblem(signed, { seq: 45, hash: 'c'.repeat(64) }, 'd'.repeat(64))).toMatchObject({ kind: 'history_rewritten' });
  });

  it('the witness floor is the newest checkpoint that verifies with the trusted key; a forged newer line is no floor', async () => {
    const signer = createSigner(parseAuditKey(TEST_AUDIT_KEY));
    const forger = createSigner(parseAuditKey(Buffer.alloc(32, 9).toString('base64')));
    const checkpoint = (by: typeof signer, size: number) =>
      by.sign({
        origin: 'twokey-audit-checkpoint/v1',
        size,
        from: size - 1,
        head: 'e'.repeat(64),
        hashes: ['e'.repeat(64)],
        timestamp: new Date(0).toISOString(),
        keyId: '',
      });
    const dir = mkdtempSync(join(tmpdir(), 'twokey-witness-'));
    try {
      writeFileSync(join(dir, 'checkpoints.jsonl'), `${JSON.stringify(checkpoint(signer, 7))}\n${JSON.stringify(checkpoint(forger, 9))}\n`);
      const witness = createCheckpointWitness({ dir, log: { newestStoredCheckpoint: async () => checkpoint(signer, 5) }, trustedKeys: [signer.publicKey] });
      // The forged line is newest in the file, so the file offers it; only the database's 5 verifies.
      expect((await witness.floor())?.size).toBe(5);
      witness.remember(checkpoint(signer, 8));
      expect((await witness.floor())?.size).toBe(8);
      // For a verdict, the untrusted checkpoint is reported, not skipped.
      expect(await witness.index()).toMatchObject({ ok: false, reason: expect.stringContaining('not trusted') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
