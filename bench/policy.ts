/**
 * `npm run bench:policy`: proposals an `echo` operation's policy rule approves at once (propose →
 * rule → approved → executed → committed, no human), with 1, 16 and 64 agents proposing at once,
 * on PGlite and (with DATABASE_URL) on PostgreSQL. In process, through the core's propose (the
 * same transaction the HTTP route runs), so the figures are the policy path and the database,
 * not HTTP. Knob: BENCH_POLICY_PROPOSALS (per concurrency level, default 300).
 *
 *   npm run bench:policy
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:policy
 */
import { performance } from 'node:perf_hooks';
import { parseConfig } from '../src/config/config-file.js';
import type { AgentRecord } from '../src/core/model.js';
import { openDatabase } from '../src/db/database.js';
import { createServices } from '../src/runtime/services.js';
import { percentiles, recordResults, round, runConcurrently } from './support/stats.js';
import { createBenchDatabase } from './support/twokey-process.js';

const PROPOSALS = Number(process.env.BENCH_POLICY_PROPOSALS ?? 300);
const CONCURRENCY = [1, 16, 64];

const CONFIG = `
operations:
  - name: small_refund
    description: Refunds a rule approves
    params:
      type: object
      required: [customer, amount_cents]
      properties:
        customer: { type: string }
        amount_cents: { type: integer }
    summary: "{{agent}} refunds {{params.amount_cents}} cents to {{params.customer}}."
    policy:
      - when: "params.customer == 'blocked'"
        decide: deny
      - when: "params.amount_cents <= 2000 && agent.startsWith('bench')"
        decide: approve
        reason: small refunds are automatic
    approval: { approvers: [web:alice] }
    executor: { type: echo }
`;

async function measure(kind: 'pglite' | 'postgres', serverUrl: string | undefined) {
  const bench = await createBenchDatabase(serverUrl);
  const database = await openDatabase({ databaseUrl: bench.url, dataDir: bench.dataDir, poolSize: 20 });
  try {
    const services = createServices({ database, config: parseConfig(CONFIG, {}, 'bench-policy.yaml') });
    const agents: AgentRecord[] = [];
    for (let i = 0; i < 64; i += 1) agents.push((await services.agents.create({ name: `bench${i}`, owners: [] })).agent);
    const propose = async (i: number) => {
      const started = performance.now();
      const { proposal } = await services.proposals.propose(agents[i % agents.length] as AgentRecord, {
        operation: 'small_refund',
        params: { customer: `c${i}`, amount_cents: 100 + (i % 1900) },
      });
      if (proposal.status !== 'committed') throw new Error(`proposal ${proposal.id} is ${proposal.status}, not committed`);
      return performance.now() - started;
    };
    for (let i = 0; i < 20; i += 1) await propose(i);
    const runs = [];
    for (const concurrency of CONCURRENCY) {
      const samples: number[] = [];
      const seconds = await runConcurrently(PROPOSALS, concurrency, async (i) => {
        samples.push(await propose(i));
      });
      const figures = percentiles(samples);
      runs.push({ concurrency, proposals: samples.length, perSecond: round(samples.length / seconds), p50ms: round(figures.p50), p99ms: round(figures.p99) });
    }
    return { database: kind, runs };
  } finally {
    await database.close();
    await bench.drop();
  }
}

const results = [await measure('pglite', undefined)];
if (process.env.DATABASE_URL) results.push(await measure('postgres', process.env.DATABASE_URL));
for (const result of results) {
  console.log(`\n${result.database}: auto-approved echo proposals (propose → committed, no human)`);
  for (const run of result.runs) {
    console.log(
      `  ${String(run.concurrency).padStart(2)} agents at once: ${run.perSecond}/s, p50 ${run.p50ms} ms, p99 ${run.p99ms} ms (${run.proposals} proposals)`,
    );
  }
}
console.log(`\nwritten to ${await recordResults('policy', results)}`);
