/**
 * `npm run bench:policy-http`: proposals a policy rule approves at once, over HTTP against a
 * `twokey serve` process (POST /v1/proposals → rule → echo executor → 201 committed), at 1 and 16
 * agents, next to the minimal raw propose + commit cycle (two transactions of plain SQL, from
 * bench/support/hotpath.ts) measured in the same run on the same database server. First it records
 * the statements and transactions one such proposal sends (at the driver of an in-process twokey).
 * PostgreSQL only (DATABASE_URL). "Added" is the p50 over a `GET /healthz` round trip measured at the
 * same concurrency just before (what any answer from that process costs); CPU is `twokey serve`'s
 * user + system time per proposal. Knobs: BENCH_POLICY_PROPOSALS (per level, default 300),
 * BENCH_SQL_TEXT=1 prints each recorded statement, BENCH_PROFILE_DIR writes CPU profiles of the
 * measured twokey there (summarise one with bench/profile-top.ts).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:policy-http
 */
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { parseConfig } from '../src/config/config-file.js';
import { loadEnv } from '../src/config/env.js';
import { startTwokey } from '../src/runtime/server.js';
import { freePort } from '../test/support/processes.js';
import { minimalCycles, withCpu } from './support/hotpath.js';
import { openRecordedDatabase, SqlRecorder } from './support/sql-trace.js';
import { percentiles, recordResults, round, runConcurrently } from './support/stats.js';
import { createAgents, createBenchDatabase, startTwokeyProcess, type BenchAgent } from './support/twokey-process.js';

const serverUrl = process.env.DATABASE_URL;
if (!serverUrl) throw new Error('bench:policy-http measures on PostgreSQL: set DATABASE_URL');
const PROPOSALS = Number(process.env.BENCH_POLICY_PROPOSALS ?? 300);
const CONCURRENCY = [1, 16];

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
      - when: "params.amount_cents <= 2000"
        decide: approve
        reason: small refunds are automatic
    approval: { approvers: [web:alice] }
    executor: { type: echo }
`;

async function propose(baseUrl: string, agent: BenchAgent, i: number): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/v1/proposals`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agent.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ operation: 'small_refund', params: { customer: `c${i}`, amount_cents: 100 + (i % 1900) } }),
  });
  const answer = (await response.json()) as { status?: string };
  if (response.status !== 201 || answer.status !== 'committed') throw new Error(`propose answered ${response.status}: ${JSON.stringify(answer)}`);
  return performance.now() - started;
}

/** The statements and transactions of one proposal, recorded at the driver of an in-process twokey. */
async function recordOne() {
  const scratch = await createBenchDatabase(serverUrl);
  const recorder = new SqlRecorder();
  const database = await openRecordedDatabase(scratch.url, recorder);
  const running = await startTwokey({
    env: loadEnv({ HOST: '127.0.0.1', PORT: String(await freePort()), LOG_LEVEL: 'warn' }),
    database,
    config: parseConfig(CONFIG, {}, 'bench-policy-http.yaml'),
    logStream: new Writable({ write: (_chunk, _encoding, done) => done() }),
    rateLimit: { max: 1_000_000, timeWindowMs: 60_000 },
    outboxPollMs: 60_000,
    sweepIntervalMs: 60_000,
    auditIntervalMs: 3_600_000,
  });
  try {
    const { agent, apiKey } = await running.services.agents.create({ name: 'bench-recorder' });
    const url = running.url;
    if (!url) throw new Error('the recording twokey is not listening');
    const benchAgent = { id: agent.id, apiKey };
    // Warm: every pooled connection has met each statement.
    for (let i = 0; i < 30; i += 1) await propose(url, benchAgent, i);
    const { statements, transactions } = await recorder.during(() => propose(url, benchAgent, 1_000));
    if (process.env.BENCH_SQL_TEXT) {
      for (const statement of statements)
        console.log(`  [${statement.inTransaction ? `tx${statement.unit}` : 'auto'}] ${statement.text.replace(/\s+/g, ' ').slice(0, 240)}`);
    }
    return { statements: statements.length, transactions };
  } finally {
    await running.close();
    await database.close();
    await scratch.drop();
  }
}

/** The p50 of `GET /healthz` at `concurrency`: the floor every answer of that process pays. */
async function healthzP50(baseUrl: string, concurrency: number): Promise<number> {
  const samples: number[] = [];
  await runConcurrently(PROPOSALS, concurrency, async () => {
    const started = performance.now();
    await (await fetch(`${baseUrl}/healthz`)).arrayBuffer();
    samples.push(performance.now() - started);
  });
  return percentiles(samples).p50;
}

async function measure() {
  const bench = await createBenchDatabase(serverUrl);
  try {
    const agents = await createAgents(bench, CONFIG, {}, 16);
    const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
    const twokey = await startTwokeyProcess(bench, CONFIG, {}, profile);
    const runs = [];
    try {
      for (let i = 0; i < 40; i += 1) await propose(twokey.url, agents[i % agents.length] as BenchAgent, i);
      for (const concurrency of CONCURRENCY) {
        const floor = await healthzP50(twokey.url, concurrency);
        const samples: number[] = [];
        const { result: seconds, cpuMs } = await withCpu(twokey.pid, () =>
          runConcurrently(PROPOSALS, concurrency, async (i) => {
            samples.push(await propose(twokey.url, agents[i % concurrency] as BenchAgent, i));
          }),
        );
        const figures = percentiles(samples);
        const raw = await minimalCycles(bench, CONFIG, {}, concurrency, PROPOSALS);
        const perSecond = round(samples.length / seconds);
        runs.push({
          concurrency,
          perSecond,
          p50ms: round(figures.p50),
          p99ms: round(figures.p99),
          healthzP50ms: round(floor, 2),
          addedP50ms: round(figures.p50 - floor, 2),
          cpuMsPerProposal: round(cpuMs / samples.length, 2),
          raw: { perSecond: raw.cyclesPerSecond, meanMs: round((1000 * concurrency) / raw.cyclesPerSecond, 2) },
          ofRaw: round(perSecond / raw.cyclesPerSecond, 2),
          // The p50 beside the raw cycle's mean time per cycle at this concurrency (two commits to its one).
          overRawMeanMs: round(figures.p50 - (1000 * concurrency) / raw.cyclesPerSecond, 2),
        });
      }
    } finally {
      await twokey.stop();
    }
    return runs;
  } finally {
    await bench.drop();
  }
}

const recorded = await recordOne();
console.log(`one policy-approved proposal over HTTP: ${recorded.statements} statements, ${recorded.transactions} transactions`);
const runs = await measure();
for (const run of runs) {
  console.log(
    `${String(run.concurrency).padStart(2)} agents: ${run.perSecond}/s (p50 ${run.p50ms} ms, added ${run.addedP50ms} ms over /healthz ${run.healthzP50ms} ms, p99 ${run.p99ms} ms, CPU ${run.cpuMsPerProposal} ms); raw minimal cycle ${run.raw.perSecond}/s (mean ${run.raw.meanMs} ms); ratio ${run.ofRaw}, p50 over the raw cycle's mean ${run.overRawMeanMs} ms`,
  );
}
console.log(`\nwritten to ${await recordResults('policy-http', { recorded, runs })}`);
