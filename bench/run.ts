/**
 * `npm run bench`: twokey end to end, as a separate `twokey serve` process talking to local fakes of
 * Slack, Discord and a downstream service, on PGlite and (with DATABASE_URL) on PostgreSQL.
 *
 *   npm run bench                                                # PGlite
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench   # PGlite, then PostgreSQL
 *
 * For each database it measures:
 *   - start-up: spawn until /readyz answers, on a new database (migrations included) and again;
 *   - the full cycle (propose → chat post → signed click → downstream call → committed), one at a
 *     time and with 16 and 64 agents at once: throughput and p50/p99 of every step;
 *   - the raw SQL of one cycle (recorded from twokey, replayed directly on the same kind of
 *     database at the same concurrency) and the ratio of the two throughputs;
 *   - Slack and Discord click-answer latency with 100 clicks arriving at once;
 *   - resident memory at rest and after 10 000 proposals, and CPU per second at rest (polls, timers).
 * A PostgreSQL run works in a throwaway database of its own on that server.
 * Knobs: BENCH_SEQUENTIAL (cycles one at a time, default 100), BENCH_CYCLES (cycles per concurrent
 * run, default 400), BENCH_BULK (proposals before the second memory reading, default 10000),
 * BENCH_PROFILE_DIR (write CPU profiles of the measured twokey there, to see where time goes),
 * BENCH_SECTIONS (comma list of startup,cycles,minimalchat,clicks,raw,minimal,core,agp,memory; default all),
 * BENCH_DRIVERS=postgres (skip PGlite), BENCH_WARMUP_CYCLES (full cycles before the first measured
 * one, default 20: what `npm run bench:baseline` compares, each side its own harness with 20; more
 * measures a server whose JIT has settled, see docs/performance.md).
 * Also: CPU ms per cycle of `twokey serve` (utime+stime from /proc/<pid>/stat), SQL statements and
 * transactions per step, the minimal raw propose + commit cycle (2 transactions) and twokey's core
 * cycle over HTTP as a ratio of it (and on PostgreSQL with two replicas against one, with the share of
 * busy backends waiting on a lock meanwhile), AGP `open` execute on echo at 16 agents and at one, with
 * twokey's CPU per execute; on PostgreSQL, the same full cycles through the minimal chat cycle
 * (bench/support/minimal-chat-cycle.ts: five statements and six HTTP exchanges, nothing else), whose
 * CPU per cycle is the floor twokey's is judged against.
 * Figures are printed and written to bench/results/latest.json (section "run").
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { parseConfig } from '../src/config/config-file.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { createServices } from '../src/runtime/services.js';
import { approveCycle, CYCLE_STEPS, type Chat, type CycleTimes } from './support/cycles.js';
import { recordOneCycle, replayOn } from './support/raw-baseline.js';
import { replayTarget } from './support/sql-trace.js';
import { percentiles, recordResults, round, rssMiB, runConcurrently, sleep, type Percentiles } from './support/stats.js';
import {
  agentClient,
  createAgents,
  createBenchDatabase,
  startTwokeyProcess,
  type AgentClient,
  type BenchAgent,
  type BenchDatabase,
  type TwokeyProcess,
} from './support/twokey-process.js';
import { agpOpenExecutes, coreCycles, createApprover, minimalCycles, sampleLockWaits, withCpu } from './support/hotpath.js';
import { startMinimalChatCycle } from './support/listening-script.js';
import { startWorld, type World } from './support/world.js';

const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 100);
const WARMUP_CYCLES = Number(process.env.BENCH_WARMUP_CYCLES ?? 20);
const CONCURRENT = Number(process.env.BENCH_CYCLES ?? 400);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
/** Agents at once for the core cycle against the minimal raw one (the two-replica comparison runs at 16). */
const CORE_AGENTS = (process.env.BENCH_CORE_AGENTS ?? '16').split(',').map(Number);
const CLICKS = 100;
/** How long twokey's CPU is measured at rest. */
const IDLE_MS = 5_000;
const BULK = Number(process.env.BENCH_BULK ?? 10_000);
/** Agents share the load so none hits its own rate limit (600 requests a minute). */
const AGENTS = 100;

const cyclesAt = (concurrency: number) => (concurrency === 1 ? SEQUENTIAL : CONCURRENT);
const rounded = (figures: Percentiles) => ({ p50: round(figures.p50), p99: round(figures.p99), max: round(figures.max) });

async function fullCycles(world: World, url: string, agents: AgentClient[], pid: number) {
  const agentFor = (i: number) => agents[i % agents.length] as AgentClient;
  for (let i = 0; i < WARMUP_CYCLES; i += 1) await approveCycle(world, url, 'slack', agentFor(i), i);
  const runs = [];
  for (const concurrency of CONCURRENCY) {
    const samples: CycleTimes[] = [];
    const { result: seconds, cpuMs } = await withCpu(pid, async () => {
      const elapsed = await runConcurrently(cyclesAt(concurrency), concurrency, async (i) => {
        samples.push(await approveCycle(world, url, 'slack', agentFor(i), i));
      });
      // The cycle's tail (the chat edit after commit) is still twokey's work for the cycle.
      await sleep(1_000);
      return elapsed;
    });
    runs.push({
      concurrency,
      cycles: samples.length,
      cyclesPerSecond: round(samples.length / seconds),
      cpuMsPerCycle: round(cpuMs / samples.length, 2),
      stepsMs: Object.fromEntries(CYCLE_STEPS.map((step) => [step, rounded(percentiles(samples.map((sample) => sample[step])))])),
    });
    world.forget();
  }
  return runs;
}

/**
 * The same full cycles, warm-up and CPU count through bench/support/minimal-chat-cycle.ts, in a
 * process of its own on the same database and fakes: what the exchanges of a chat cycle cost on this
 * machine with none of twokey's own work (PostgreSQL only: it speaks postgres.js).
 */
async function minimalChatCycles(world: World, databaseUrl: string) {
  const apiKey = `minimal-${randomBytes(12).toString('hex')}`;
  const minimal = await startMinimalChatCycle(world, databaseUrl, apiKey);
  try {
    return await fullCycles(world, minimal.origin, [agentClient(minimal.origin, { id: 'minimal', apiKey })], minimal.pid);
  } finally {
    await minimal.stop();
  }
}

/** 100 approvers click at once, each on a different proposal already posted to chat. */
async function clickBurst(world: World, url: string, chat: Chat, agents: AgentClient[]) {
  const clickers = agents.slice(0, CLICKS);
  const ids = await Promise.all(clickers.map((agent, n) => agent.propose(`bench_${chat}`, { n })));
  await Promise.all(ids.map((id) => world.arrivals.wait(`${chat}:${id}`)));
  await sleep(500);
  // The same burst with a wrong signature first: what answering 100 clicks costs on this machine
  // before twokey does anything of its own (refused, so it changes nothing). Measured the second
  // time, so that it and the real burst both find 100 connections already open.
  await Promise.all(ids.map((id) => world.forgedClick(url, chat, id)));
  await sleep(500);
  const floor = percentiles(await Promise.all(ids.map((id) => world.forgedClick(url, chat, id))));
  await sleep(500);
  const started = performance.now();
  const latencies = await Promise.all(ids.map((id) => (chat === 'slack' ? world.slackClick(url, id) : world.discordClick(url, id))));
  await Promise.all(ids.map((id, i) => (clickers[i] as AgentClient).until(id, 'committed')));
  const allCommittedMs = performance.now() - started;
  world.forget();
  return {
    clicks: latencies.length,
    ...rounded(percentiles(latencies)),
    forgedP50: round(floor.p50),
    forgedP99: round(floor.p99),
    allCommittedMs: round(allCommittedMs, 0),
  };
}

/** A database to replay on, with an agent of its own: the served one on PostgreSQL, a new directory on PGlite. */
async function replayDatabase(
  database: BenchDatabase,
  world: World,
): Promise<{ target: Database; agentId: string; agentKeyHash: string; close(): Promise<void> }> {
  const dataDir = database.url ? database.dataDir : await mkdtemp(join(tmpdir(), 'twokey-raw-'));
  // The same pool size `twokey serve` uses.
  const target = await openDatabase({ databaseUrl: database.url, dataDir, poolSize: 10 });
  const services = createServices({ database: target, config: parseConfig(world.configYaml, world.env, 'bench') });
  const { agent } = await services.agents.create({ name: `bench-raw-${Date.now()}` });
  const result = await target.db.execute(sql`select key_hash from agents where id = ${agent.id}`);
  const [row] = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Array<{ key_hash: string }>;
  return {
    target,
    agentId: agent.id,
    agentKeyHash: row?.key_hash ?? '',
    async close() {
      await target.close();
      if (!database.url) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function rawCycles(world: World, database: BenchDatabase, serverUrl: string | undefined) {
  const recorded = await recordOneCycle(world, serverUrl);
  const replayOnto = await replayDatabase(database, world);
  try {
    const replay = replayOn(recorded, replayOnto);
    const target = replayTarget(replayOnto.target);
    for (let i = 0; i < 20; i += 1) await replay.run(target);
    const runs = [];
    for (const concurrency of CONCURRENCY) {
      const seconds = await runConcurrently(cyclesAt(concurrency), concurrency, () => replay.run(target));
      runs.push({ concurrency, cyclesPerSecond: round(cyclesAt(concurrency) / seconds) });
    }
    return { statementsPerCycle: replay.statements, transactionsPerCycle: replay.transactions, steps: recorded.steps, runs };
  } finally {
    await replayOnto.close();
  }
}

async function memoryAfterBulk(world: World, pid: number, agents: AgentClient[]) {
  world.forget();
  await runConcurrently(BULK, 32, async (n) => {
    await (agents[n % agents.length] as AgentClient).propose('bench_slack', { n });
  });
  // Wait for the outbox to post every one of them, then for the process to settle.
  while (world.arrivals.count('slack:') < BULK) await sleep(500);
  await sleep(3_000);
  const rss = await rssMiB(pid);
  world.forget();
  return rss;
}

const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'startup,cycles,minimalchat,clicks,raw,minimal,core,agp,memory').split(','));

/** The minimal raw cycle, and twokey's core cycle over HTTP (one replica, and two on PostgreSQL), at 16 agents. */
async function coreFigures(world: World, database: BenchDatabase, twokey: TwokeyProcess, benchAgents: BenchAgent[]) {
  const concurrency = 16;
  const byAgents: Array<{
    agents: number;
    minimal: Awaited<ReturnType<typeof minimalCycles>> | null;
    core: (Awaited<ReturnType<typeof coreCycles>> & { cpuMsPerCycle: number; ofMinimal: number | null }) | null;
  }> = [];
  const approver = SECTIONS.has('core') ? await createApprover(database, world.configYaml, world.env) : null;
  try {
    for (const agents of CORE_AGENTS) {
      const minimal = SECTIONS.has('minimal') ? await minimalCycles(database, world.configYaml, world.env, agents, cyclesAt(agents)) : null;
      let core = null;
      if (approver) {
        const { result, cpuMs } = await withCpu(twokey.pid, () => coreCycles([twokey.url], benchAgents, approver.approve, agents, cyclesAt(agents)));
        core = {
          ...result,
          cpuMsPerCycle: round(cpuMs / result.cycles, 2),
          ofMinimal: minimal ? round(result.cyclesPerSecond / minimal.cyclesPerSecond, 2) : null,
        };
      }
      byAgents.push({ agents, minimal, core });
    }
  } catch (error) {
    await approver?.close();
    throw error;
  }
  const at16 = byAgents.find((run) => run.agents === concurrency);
  const minimal = at16?.minimal ?? null;
  if (!approver) return { minimal, byAgents };
  try {
    const core = at16?.core ?? null;
    let twoReplicas = null;
    if (database.url) {
      const url = database.url;
      const second = await startTwokeyProcess(database, world.configYaml, world.env);
      try {
        // The new replica warms up (JIT, its connections' named statements) before it is measured.
        await coreCycles([twokey.url, second.url], benchAgents, approver.approve, concurrency, CONCURRENT, CONCURRENT);
        // One replica and two, in turn, twice each (a checkpoint or autovacuum can slow one run a
        // lot), each with what the database's busy backends waited on meanwhile.
        const runs: Array<{ replicas: 1 | 2; cyclesPerSecond: number; lockWaitShare: number; byEvent: Record<string, number> }> = [];
        for (const replicas of [1, 2, 1, 2] as const) {
          const urls = replicas === 1 ? [twokey.url] : [twokey.url, second.url];
          const measured = await sampleLockWaits(url, () => coreCycles(urls, benchAgents, approver.approve, concurrency, CONCURRENT, 0));
          runs.push({ replicas, cyclesPerSecond: measured.result.cyclesPerSecond, lockWaitShare: measured.lockWaitShare, byEvent: measured.byEvent });
        }
        const best = (replicas: 1 | 2) => Math.max(...runs.filter((run) => run.replicas === replicas).map((run) => run.cyclesPerSecond));
        const mostWaits = (replicas: 1 | 2) => Math.max(...runs.filter((run) => run.replicas === replicas).map((run) => run.lockWaitShare));
        twoReplicas = {
          concurrency,
          cycles: CONCURRENT,
          cyclesPerSecond: best(2),
          oneReplica: best(1),
          ofOneReplica: round(best(2) / best(1), 2),
          lockWaitShare: { oneReplica: mostWaits(1), twoReplicas: mostWaits(2) },
          runs,
        };
      } finally {
        await second.stop();
      }
    }
    return { minimal, core, twoReplicas, byAgents };
  } finally {
    await approver.close();
  }
}

/**
 * AGP `open` execute on echo, with twokey's CPU per execute (each run's /healthz floor runs first,
 * outside it): at 16 agents for throughput, and one at a time for the latency it adds, which only
 * reads true there (at 16 at once, p50 is about 16 / throughput, whatever one execute costs).
 */
async function agpFigures(twokey: TwokeyProcess, benchAgents: BenchAgent[]) {
  const runs = [];
  for (const [concurrency, requests] of [
    [16, Math.max(CONCURRENT * 5, 2_000)],
    [1, Math.max(SEQUENTIAL * 5, 500)],
  ] as const) {
    let cpuMs = 0;
    const figures = await agpOpenExecutes(twokey.url, benchAgents, concurrency, requests, async (executes) => {
      const measured = await withCpu(twokey.pid, executes);
      cpuMs = measured.cpuMs;
      return measured.result;
    });
    runs.push({ ...figures, cpuMsPerExecute: round(cpuMs / requests, 2) });
  }
  return runs;
}

async function benchDriver(serverUrl: string | undefined) {
  const world = await startWorld();
  const database = await createBenchDatabase(serverUrl);
  try {
    const first = await startTwokeyProcess(database, world.configYaml, world.env);
    await first.stop();
    const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
    const twokey = await startTwokeyProcess(database, world.configYaml, world.env, profile);
    try {
      await sleep(3_000);
      const rssAtRestMiB = await rssMiB(twokey.pid);
      // What twokey costs doing nothing, chat configured: its polls and timers.
      const idleCpuMsPerSecond = round((await withCpu(twokey.pid, () => sleep(IDLE_MS))).cpuMs / (IDLE_MS / 1000), 1);
      const benchAgents = await createAgents(database, world.configYaml, world.env, AGENTS);
      const agents = benchAgents.map((agent) => agentClient(twokey.url, agent));
      const cycles = SECTIONS.has('cycles') ? await fullCycles(world, twokey.url, agents, twokey.pid) : [];
      const minimalChat = SECTIONS.has('minimalchat') && serverUrl ? await minimalChatCycles(world, database.url!) : null;
      const clicks = SECTIONS.has('clicks')
        ? { slack: await clickBurst(world, twokey.url, 'slack', agents), discord: await clickBurst(world, twokey.url, 'discord', agents) }
        : null;
      const raw = SECTIONS.has('raw') ? await rawCycles(world, database, serverUrl) : null;
      const hotpath = await coreFigures(world, database, twokey, benchAgents);
      const agp = SECTIONS.has('agp') ? await agpFigures(twokey, benchAgents) : null;
      const rssAfterBulkMiB = SECTIONS.has('memory') ? await memoryAfterBulk(world, twokey.pid, agents) : null;
      return {
        driver: database.kind,
        startupMs: { newDatabase: round(first.startupMs, 0), existingDatabase: round(twokey.startupMs, 0) },
        rssMiB: { atRest: rssAtRestMiB, [`after${BULK}Proposals`]: rssAfterBulkMiB },
        idleCpuMsPerSecond,
        cycles,
        minimalChat,
        raw,
        ...hotpath,
        agp,
        clicks,
      };
    } finally {
      await twokey.stop();
    }
  } finally {
    await database.drop();
    await world.close();
  }
}

function printReport(drivers: Array<Awaited<ReturnType<typeof benchDriver>>>) {
  console.log('\nFull cycle: propose over HTTP → Slack post → signed click → downstream call → committed (times in ms)');
  console.table(
    drivers.flatMap((figures) =>
      figures.cycles.map((run) => {
        const raw = figures.raw?.runs.find((r) => r.concurrency === run.concurrency)?.cyclesPerSecond ?? 0;
        return {
          database: figures.driver,
          agents: run.concurrency,
          cycles: run.cycles,
          'cycles/s': run.cyclesPerSecond,
          'CPU ms/cycle': run.cpuMsPerCycle,
          'raw SQL cycles/s': raw,
          'twokey/raw': raw ? round(run.cyclesPerSecond / raw, 2) : null,
          ...Object.fromEntries(Object.entries(run.stepsMs).map(([step, ms]) => [step, `${ms.p50} / ${ms.p99}`])),
        };
      }),
    ),
  );
  console.log("(step columns: p50 / p99; raw SQL = the same statements and transactions, replayed directly; CPU = twokey serve's user+system time / cycles)");
  if (drivers.some((figures) => figures.minimalChat)) {
    console.log('\nThe same full cycles through the minimal chat cycle (5 statements, 6 HTTP exchanges): CPU ms per cycle, twokey beside it');
    console.table(
      drivers.flatMap((figures) =>
        (figures.minimalChat ?? []).map((run) => {
          const twokey = figures.cycles.find((r) => r.concurrency === run.concurrency);
          return {
            database: figures.driver,
            agents: run.concurrency,
            'minimal CPU ms/cycle': run.cpuMsPerCycle,
            'twokey CPU ms/cycle': twokey?.cpuMsPerCycle ?? null,
            'twokey/minimal': twokey ? round(twokey.cpuMsPerCycle / run.cpuMsPerCycle, 2) : null,
            'minimal cycles/s': run.cyclesPerSecond,
          };
        }),
      ),
    );
  }
  if (drivers.some((figures) => figures.raw)) {
    console.log('\nSQL per step of one full cycle (statements / transactions / round trips), recorded at the driver');
    const roundTrips = (count: number | null) => (count === null ? '' : ` / ${count}`);
    console.table(
      drivers
        .filter((figures) => figures.raw)
        .map((figures) => {
          const steps = figures.raw!.steps;
          const total = steps.every((step) => step.roundTrips !== null) ? steps.reduce((sum, step) => sum + (step.roundTrips ?? 0), 0) : null;
          return {
            database: figures.driver,
            ...Object.fromEntries(steps.map((step) => [step.step, `${step.statements} / ${step.transactions}${roundTrips(step.roundTrips)}`])),
            total: `${figures.raw!.statementsPerCycle} / ${figures.raw!.transactionsPerCycle}${roundTrips(total)}`,
          };
        }),
    );
    console.log(
      "(round trips: writes to the database sockets, PostgreSQL only: BEGIN and COMMIT count, pipelined statements share one; they include the notifier and the elected jobs' lease checks, about one a second)",
    );
  }
  if (drivers.some((figures) => figures.minimal || figures.core)) {
    console.log(
      '\nCore cycle over HTTP (propose → approve, CLI path → commit with the token; echo, no chat) against the minimal raw cycle (2 transactions), 16 agents',
    );
    console.table(
      drivers.map((figures) => ({
        database: figures.driver,
        'minimal raw cycles/s': figures.minimal?.cyclesPerSecond ?? null,
        'core cycles/s': figures.core?.cyclesPerSecond ?? null,
        'core/minimal': figures.core?.ofMinimal ?? null,
        'core CPU ms/cycle': figures.core?.cpuMsPerCycle ?? null,
        'core cycles/s, one / two replicas (best of 2 runs each)': figures.twoReplicas
          ? `${figures.twoReplicas.oneReplica} / ${figures.twoReplicas.cyclesPerSecond}`
          : null,
        'two / one replica': figures.twoReplicas?.ofOneReplica ?? null,
        'lock waits, one / two replicas': figures.twoReplicas
          ? `${figures.twoReplicas.lockWaitShare.oneReplica} / ${figures.twoReplicas.lockWaitShare.twoReplicas}`
          : null,
      })),
    );
  }
  if (drivers.some((figures) => figures.agp)) {
    console.log('\nAGP execute, policy open, echo business, 16 agents and one at a time (ms; added = p50 − /healthz p50 at the same concurrency)');
    console.table(drivers.flatMap((figures) => (figures.agp ?? []).map((run) => ({ database: figures.driver, ...run }))));
  }
  if (drivers.some((figures) => figures.clicks)) {
    console.log('\nClick answers, 100 at once (ms; forged = the same burst with a wrong signature, refused: the floor)');
    console.table(
      drivers.flatMap((figures) =>
        figures.clicks ? (['slack', 'discord'] as const).map((chat) => ({ database: figures.driver, chat, ...figures.clicks![chat] })) : [],
      ),
    );
  }
  console.log('\nStart-up (ms), resident memory (MiB) and CPU at rest (ms per second)');
  console.table(
    drivers.map((figures) => ({
      database: figures.driver,
      ...figures.startupMs,
      ...figures.rssMiB,
      'idle CPU ms/s': figures.idleCpuMsPerSecond,
      'SQL statements per cycle': figures.raw?.statementsPerCycle ?? null,
      'transactions per cycle': figures.raw?.transactionsPerCycle ?? null,
    })),
  );
}

const drivers = process.env.BENCH_DRIVERS === 'postgres' ? [] : [await benchDriver(undefined)];
if (process.env.DATABASE_URL) drivers.push(await benchDriver(process.env.DATABASE_URL));
printReport(drivers);
const file = await recordResults('run', { node: process.version, cpus: cpus().length, drivers });
console.log(`\nwritten to ${file}`);
