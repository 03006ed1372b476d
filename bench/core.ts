/**
 * Core throughput: propose and commit through the real services on a real database, sequential and
 * 16-way concurrent, beside the raw SQL one cycle issues driven directly on the same database.
 *   npm run bench:core                      # PGlite (in memory)
 *   DATABASE_URL=postgres://… npm run bench:core   # PGlite and PostgreSQL
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../src/config/config-file.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { createServices } from '../src/runtime/services.js';

const N = Number(process.env.BENCH_N ?? 400);
const CONFIG = `
operations:
  - name: upgrade_plan
    description: bench
    params: { type: object, required: [org, plan], properties: { org: { type: string }, plan: { type: string } } }
    summary: "{{agent}} upgrades {{params.org}} to {{params.plan}}"
    approval: { approvers: [web:alice], quorum: 1 }
    commit: agent
    executor: { type: echo }
`;

interface Stats { opsPerSecond: number; p50: number; p99: number }

async function measure(count: number, concurrency: number, work: (i: number) => Promise<unknown>): Promise<Stats> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) {
        const t0 = performance.now();
        await work(i);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pick = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { opsPerSecond: count / seconds, p50: pick(0.5), p99: pick(0.99) };
}

/** The statements one propose and one commit issue (the same count, order and locks), without twokey around them. */
function rawCycle(database: Database, agentId: string) {
  const run = async (statements: Array<[string, unknown[]]>) => {
    if (database.client) {
      await database.client.begin(async (sql) => {
        for (const [text, params] of statements) await sql.unsafe(text, params as never[]);
      });
    } else if (database.pglite) {
      await database.pglite.transaction(async (tx) => {
        for (const [text, params] of statements) await tx.query(text, params);
      });
    }
  };
  const audit = (id: string): Array<[string, unknown[]]> => [
    ['select pg_advisory_xact_lock(1)', []],
    ['select hash from audit_events order by seq desc limit 1', []],
    ["insert into audit_events (at, type, actor, proposal_id, agent_id, data, prev_hash, hash) values (now(), 'raw', 'raw', $1, $2, '{}', 'x', 'y')", [id, agentId]],
  ];
  return {
    propose: (id: string) =>
      run([
        [
          `insert into proposals (id, agent_id, operation, params, params_hash, summary, summary_hash, confirmation_type, token_hash, status, quorum, commit_mode, created_at, expires_at, updated_at)
           values ($1, $2, 'upgrade_plan', '{"org":"a","plan":"b"}', 'h', 's', 'h', 'approval', $3, 'approved', 1, 'agent', now(), now() + interval '5 minutes', now())`,
          [id, agentId, randomBytes(16).toString('hex')],
        ],
        ...audit(id),
        ['select * from proposals where id = $1 for update', [id]],
        ["select pg_notify('twokey_proposals', $1)", [id]],
      ]),
    commit: (id: string) =>
      run([
        ['select * from proposals where id = $1 for update', [id]],
        ['select * from agents where id = $1', [agentId]],
        ['select * from approvals where proposal_id = $1', [id]],
        ["update proposals set status = 'committed', consumed_at = now(), result = '{}', updated_at = now() where id = $1", [id]],
        ...audit(id),
        ['select * from proposals where id = $1 for update', [id]],
        ["select pg_notify('twokey_proposals', $1)", [id]],
      ]),
  };
}

async function benchDriver(label: string, databaseUrl: string | undefined) {
  const rows: Array<Record<string, string>> = [];
  for (const concurrency of [1, 16]) {
    const database = await openDatabase({ databaseUrl, dataDir: '', memory: !databaseUrl, poolSize: 16 });
    try {
      const services = createServices({ database, config: parseConfig(CONFIG, {}, 'bench') });
      const { agent } = await services.agents.create({ name: `bench-${randomBytes(4).toString('hex')}` });
      const params = { org: 'acme', plan: 'scale' };
      // Warm up the JIT and the connection pool so the first measured step is not penalised.
      for (let i = 0; i < 50; i += 1) {
        const warm = await services.proposals.propose(agent, { operation: 'upgrade_plan', params });
        await services.proposals.approve(warm.proposal.id, { identity: 'web:alice', via: 'bench' });
        await services.proposals.commit(agent, warm.proposal.id, warm.confirmToken, { operation: 'upgrade_plan', params });
      }
      const tokens: Array<{ id: string; token: string }> = [];
      const propose = await measure(N, concurrency, async () => {
        const { proposal, confirmToken } = await services.proposals.propose(agent, { operation: 'upgrade_plan', params });
        tokens.push({ id: proposal.id, token: confirmToken });
      });
      for (const { id } of tokens) await services.proposals.approve(id, { identity: 'web:alice', via: 'bench' });
      const commit = await measure(N, concurrency, (i) => {
        const entry = tokens[i];
        if (!entry) throw new Error('missing token');
        return services.proposals.commit(agent, entry.id, entry.token, { operation: 'upgrade_plan', params });
      });

      const raw = rawCycle(database, agent.id);
      for (let i = 0; i < 50; i += 1) {
        const warmId = `warm_${randomBytes(8).toString('hex')}`;
        await raw.propose(warmId);
        await raw.commit(warmId);
      }
      const rawIds = Array.from({ length: N }, () => `raw_${randomBytes(8).toString('hex')}`);
      const rawPropose = await measure(N, concurrency, (i) => raw.propose(rawIds[i] ?? ''));
      const rawCommit = await measure(N, concurrency, (i) => raw.commit(rawIds[i] ?? ''));
      for (const [step, core, sqlOnly] of [['propose', propose, rawPropose], ['commit', commit, rawCommit]] as const) {
        rows.push({
          driver: label,
          concurrency: String(concurrency),
          step,
          'ops/s': core.opsPerSecond.toFixed(0),
          'p50 ms': core.p50.toFixed(2),
          'p99 ms': core.p99.toFixed(2),
          'raw SQL ops/s': sqlOnly.opsPerSecond.toFixed(0),
          'core/raw': (core.opsPerSecond / sqlOnly.opsPerSecond).toFixed(2),
        });
      }
    } finally {
      await database.close();
    }
  }
  return rows;
}

const results = [...(await benchDriver('pglite (memory)', undefined))];
if (process.env.DATABASE_URL) results.push(...(await benchDriver('postgresql', process.env.DATABASE_URL)));
console.log(`twokey core benchmark, N=${N} per step (node ${process.version})`);
console.table(results);
