import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { openDatabase } from '../../src/db/database.js';
import { createServices } from '../../src/runtime/services.js';
import { runCli } from '../support/processes.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { existingEmbeddedDatabase } from '../support/embedded-template.js';

const CONFIG = configYaml([
  refundOperation({
    customer: true,
    policy: [
      { when: "params.customer == 'blocked'", decide: 'deny', reason: 'this customer is blocked from refunds' },
      { when: "params.amount_cents <= 2000 && count_last('1h') < 10", decide: 'approve', reason: 'small refunds are automatic' },
    ],
    approvers: ['web:alice', 'web:bob'],
    grants: { maxDuration: '8h' },
    commit: 'on_approve',
  }),
]);

// Each CLI call is a new process (tsx compiles, PGlite opens, 10 to 20 s on a busy machine): generous timeouts.
describe('twokey policy test and twokey grants, as processes on the embedded database', { timeout: 600_000 }, () => {
  let dataDir: string;
  let env: Record<string, string>;
  let grantId: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'twokey-cli-policy-'));
    await existingEmbeddedDatabase(dataDir);
    const configPath = join(dataDir, 'twokey.config.yaml');
    await writeFile(configPath, CONFIG);
    env = { TWOKEY_DATA_DIR: dataDir, TWOKEY_CONFIG: configPath, LOG_LEVEL: 'warn', DATABASE_URL: '' };
    // A database holding a grant, given the way an approver gives one; closed before any CLI call opens it.
    const database = await openDatabase({ dataDir });
    try {
      const services = createServices({ database, config: parseConfig(CONFIG, {}, configPath) });
      const { agent } = await services.agents.create({ name: 'argus' });
      const proposal = await services.proposals.propose(agent, { operation: 'refund', params: { customer: 'c1', amount_cents: 5000 } });
      const { grant } = await services.grants.approveAndGrant(
        proposal.proposal.id,
        { identity: 'web:alice', via: 'test' },
        { durationMs: 3_600_000, maxUses: 3, bounded: true },
      );
      grantId = grant.id;
    } finally {
      await database.close();
    }
  }, 300_000);
  afterAll(async () => {
    for (const path of [dataDir, `${dataDir}.audit-key.pem`, `${dataDir}.audit-checkpoints`]) await rm(path, { recursive: true, force: true });
  });

  it('policy test prints each rule it tried and the decision with its reason', async () => {
    const approved = await runCli(['policy', 'test', 'refund', '--params', '{"customer":"c1","amount_cents":1500}', '--agent', 'argus'], env);
    expect(approved).toMatchObject({ code: 0, stderr: '' });
    expect(approved.stdout.trim().split('\n')).toEqual([
      "rule #0: params.customer == 'blocked' → false",
      "rule #1: params.amount_cents <= 2000 && count_last('1h') < 10 → true",
      'decision: approve by policy:refund#1 (small refunds are automatic)',
    ]);

    const denied = await runCli(['policy', 'test', 'refund', '--params', '{"customer":"blocked","amount_cents":1}', '--agent', 'someone-new'], env);
    expect(denied.code).toBe(0);
    expect(denied.stdout).toContain('decision: deny by policy:refund#0 (this customer is blocked from refunds)');

    const human = await runCli(['policy', 'test', 'refund', '--params', '{"customer":"c1","amount_cents":5000}', '--agent', 'argus'], env);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/decision: require \(no rule matched: the operation's approval applies\); needs 1 of web:alice, ?web:bob/);
  });

  it('policy test refuses bad JSON, params off the schema and an unknown operation, exiting non-zero', async () => {
    const badJson = await runCli(['policy', 'test', 'refund', '--params', '{customer: c1}', '--agent', 'argus'], env);
    expect(badJson).toMatchObject({ code: 1, stdout: '' });
    expect(badJson.stderr).toContain('--params must be JSON');
    const offSchema = await runCli(['policy', 'test', 'refund', '--params', '{"customer":"c1"}', '--agent', 'argus'], env);
    expect(offSchema.code).toBe(1);
    expect(offSchema.stderr).toContain('params do not match the schema of "refund"');
    const unknown = await runCli(['policy', 'test', 'refnud', '--params', '{}', '--agent', 'argus'], env);
    expect(unknown).toMatchObject({ code: 1, stdout: '' });
    expect(unknown.stderr).toContain('unknown operation "refnud"');
  });

  it('grants list shows the grant; grants revoke ends it; a second revoke and an unknown id fail', async () => {
    const listed = await runCli(['grants', 'list'], env);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    const row = listed.stdout.split('\n').find((line) => line.includes(grantId)) ?? '';
    for (const cell of ['active', 'refund', 'argus', 'web:alice', '0/3', 'amount_cents ≤ 5000', 'customer = "c1"']) expect(row).toContain(cell);

    const revoked = await runCli(['grants', 'revoke', grantId, '--as', 'web:bob'], env);
    expect(revoked).toMatchObject({ code: 0, stderr: '' });
    expect(revoked.stdout).toMatch(new RegExp(`^grant ${grantId} revoked at \\S+ after 0 use\\(s\\)`));

    // Active grants only by default; --all shows the revoked one.
    expect((await runCli(['grants', 'list'], env)).stdout).not.toContain(grantId);
    const all = await runCli(['grants', 'list', '--all'], env);
    expect(all.stdout.split('\n').find((line) => line.includes(grantId))).toContain('revoked');

    const again = await runCli(['grants', 'revoke', grantId], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already revoked');
    const missing = await runCli(['grants', 'revoke', 'grt_nope'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no grant grt_nope');
  });
});
