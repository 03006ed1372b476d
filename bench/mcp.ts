/**
 * `npm run bench:mcp`: what twokey adds to an MCP tool call that needs no human. A read-only tool of
 * an upstream MCP server (the SDK's McpServer over Streamable HTTP on 127.0.0.1) is called directly,
 * and through a separate `twokey serve` process that imports it via `upstreams:` and passes it
 * straight through (propose → rule approval → upstream call → committed, every step audited).
 * 1 and 16 clients, each sending its next call as soon as its last one answered; p50/p99 of both and
 * of the difference at each percentile, and the CPU time the twokey process spent per call (what a
 * call costs even when a busy machine makes latencies wait on other processes). On PostgreSQL when DATABASE_URL is set, else on PGlite.
 * On PostgreSQL, a third way in the same run: the minimal pass-through (bench/support/minimal-pass-through.ts,
 * fastify + two autocommitted statements + undici, in a process of its own), the floor under what
 * any gateway that records each call adds on this machine.
 * Knobs: BENCH_MCP_CALLS (calls per run, default 200), BENCH_MCP_WARMUP (calls before it, default
 * 200; each row has an agent of its own, which may make 600 calls a minute), BENCH_MCP_JIT_WARMUP
 * (calls through each way before the first row, default 2400; see JIT_WARMUP);
 * BENCH_MCP_CLIENTS (comma list, default 1,16); BENCH_PROFILE_DIR (a V8 CPU profile of the
 * `twokey serve` process written there, for bench/profile-top.ts).
 * Each row's calls go in turns (see TURN_CALLS_PER_CLIENT): direct, minimal and twokey share the
 * same seconds of the machine, and each is compared with the others measured alongside it.
 */
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { readOnlyNotesConfig, startFakeUpstream } from '../test/mcp/support.js';
import { percentiles, recordResults, round, runConcurrently, threadsCpuMs, type Percentiles } from './support/stats.js';
import { startListeningScript } from './support/listening-script.js';
import { createAgents, createBenchDatabase, startTwokeyProcess } from './support/twokey-process.js';

const CALLS = Number(process.env.BENCH_MCP_CALLS ?? 200);
/**
 * Calls before each row's measured run, on that row's own connections (and, through twokey, its own
 * agent): the connections opened and the row's concurrency seen. The compiling itself is done by
 * JIT_WARMUP, once, before the first row: 200 calls were not enough for it.
 */
const WARMUP = Number(process.env.BENCH_MCP_WARMUP ?? 200);
/**
 * Calls through each way (direct, minimal, twokey) before the first row, so that each is measured as
 * a server that has been running is: V8 keeps optimising functions of a call's path for about the
 * first 2,000 calls (measured on a 2-core machine at one client, 400 calls a step: 6.5, 4.1, 3.8,
 * 3.5, 2.8, 2.7, 2.4 ms of twokey's CPU per call), and the busier compiler thread takes one of the
 * machine's two cores from the call. Every way gets the same count; a smaller, simpler process
 * (the minimal) is warm sooner, so a short warm-up would measure twokey's JIT as much as twokey.
 * Spread over agents of their own through twokey, each within its rate limit.
 */
const JIT_WARMUP = Number(process.env.BENCH_MCP_JIT_WARMUP ?? 2400);
/** Calls one warm-up agent makes: under its rate limit of 600 a minute, with the row's warm-up. */
const CALLS_PER_WARMUP_AGENT = 400;
/** Connections per way during the JIT warm-up: concurrent calls take paths a lone call does not (group commit). */
const JIT_WARMUP_CLIENTS = 4;
const CLIENTS = (process.env.BENCH_MCP_CLIENTS ?? '1,16').split(',').map(Number);
/**
 * Calls each client makes through one way before the next way takes its turn. A shared 2-core
 * machine's speed moves within a run: measured one way after the other, a row's direct calls and
 * its calls through twokey saw different machines (the direct p50 went from 1.4 to 3.6 ms between
 * runs of one hour). In turns, a slow spell lands on every way. A row whose calls make fewer than
 * two turns (16 clients: 200 calls) runs each way once, whole: turns that short would measure their
 * ramps more than their concurrency.
 */
const TURN_CALLS_PER_CLIENT = 20;
const TOKEN = 'bench-upstream-token-0123456789';

async function connect(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

async function measure(clients: Client[], tool: string, count: number): Promise<{ latencies: number[]; callsPerSecond: number }> {
  const latencies: number[] = [];
  const seconds = await runConcurrently(count, clients.length, async (index) => {
    const client = clients[index % clients.length]!;
    const started = performance.now();
    const result = await client.callTool({ name: tool, arguments: { name: 'groceries' } });
    latencies.push(performance.now() - started);
    if (result.isError) throw new Error(`call failed: ${JSON.stringify(result.content)}`);
  });
  return { latencies, callsPerSecond: count / seconds };
}

/** A way to the upstream tool: its connections, the tool's name there, and the process whose CPU it costs (none: the benchmark's own). */
interface Way {
  clients: Client[];
  tool: string;
  pid?: number;
}

interface Measured {
  latencies: number[];
  callsPerSecond: number;
  /** CPU of the way's process per call, in its own turns (0 for a way without one). */
  cpuMsPerCall: number;
}

/**
 * `count` calls through each way, in turns of TURN_CALLS_PER_CLIENT calls a client, the order of the
 * ways rotating each turn; per way its latencies, its calls/s over its own turns, and the CPU its
 * process spent in them per call.
 */
async function measureInTurns(ways: Way[], count: number): Promise<Measured[]> {
  const clients = ways[0]!.clients.length;
  const turns = Math.max(1, Math.floor(count / (TURN_CALLS_PER_CLIENT * clients)));
  const totals = ways.map(() => ({ latencies: [] as number[], seconds: 0, cpuMs: 0 }));
  for (let turn = 0; turn < turns; turn += 1) {
    // The last turn takes what the division left.
    const calls = turn === turns - 1 ? count - Math.floor(count / turns) * (turns - 1) : Math.floor(count / turns);
    for (let step = 0; step < ways.length; step += 1) {
      const index = (turn + step) % ways.length;
      const way = ways[index]!;
      const total = totals[index]!;
      const cpuBefore = way.pid ? await threadsCpuMs(way.pid) : 0;
      const measured = await measure(way.clients, way.tool, calls);
      if (way.pid) total.cpuMs += (await threadsCpuMs(way.pid)) - cpuBefore;
      total.latencies.push(...measured.latencies);
      total.seconds += calls / measured.callsPerSecond;
    }
  }
  return totals.map((total) => ({ latencies: total.latencies, callsPerSecond: count / total.seconds, cpuMsPerCall: total.cpuMs / count }));
}

const show = (p: Percentiles) => `${round(p.p50, 1)} / ${round(p.p99, 1)}`;

/** The minimal pass-through's figures beside the direct call's. */
const minimalRow = (m: Percentiles, direct: Percentiles, callsPerSecond: number, cpuMsPerCall: number) => ({
  ms: m,
  addedMs: { p50: m.p50 - direct.p50, p99: m.p99 - direct.p99 },
  callsPerSecond: round(callsPerSecond),
  cpuMsPerCall: round(cpuMsPerCall, 2),
});

/** JIT_WARMUP calls through each way, JIT_WARMUP_CLIENTS at a time (see JIT_WARMUP). */
async function warmUpJit(directUrl: string, twokeyUrl: string, minimalUrl: string | null, agents: Array<{ apiKey: string }>): Promise<void> {
  const clientsOf = (url: string, headers: Record<string, string>) => Promise.all(Array.from({ length: JIT_WARMUP_CLIENTS }, () => connect(url, headers)));
  const warm = async (clients: Client[], tool: string, count: number) => {
    await measure(clients, tool, count);
    await Promise.all(clients.map((client) => client.close()));
  };
  await warm(await clientsOf(directUrl, { authorization: `Bearer ${TOKEN}` }), 'read_note', JIT_WARMUP);
  if (minimalUrl) await warm(await clientsOf(minimalUrl, {}), 'read_note', JIT_WARMUP);
  let left = JIT_WARMUP;
  for (const agent of agents) {
    const count = Math.min(left, CALLS_PER_WARMUP_AGENT);
    await warm(await clientsOf(twokeyUrl, { authorization: `Bearer ${agent.apiKey}` }), 'notes_read_note', count);
    left -= count;
  }
}

async function benchOn(serverUrl: string | undefined) {
  const upstream = await startFakeUpstream({ token: TOKEN });
  const database = await createBenchDatabase(serverUrl);
  const config = readOnlyNotesConfig(upstream, TOKEN, 'web:operator');
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const twokey = await startTwokeyProcess(database, config, {}, profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
  const minimalProcess = database.url
    ? await startListeningScript('minimal-pass-through', { DATABASE_URL: database.url, UPSTREAM_URL: upstream.url, UPSTREAM_TOKEN: TOKEN })
    : null;
  const minimal = minimalProcess ? { url: `${minimalProcess.origin}/mcp`, pid: minimalProcess.pid, stop: () => minimalProcess.stop() } : null;
  const rows = [];
  try {
    // One agent per row: each stays within its own rate limit (600 calls a minute) through its warm-up and run.
    const warmupAgentCount = Math.ceil(JIT_WARMUP / CALLS_PER_WARMUP_AGENT);
    const allAgents = await createAgents(database, config, {}, CLIENTS.length + warmupAgentCount);
    const rowAgents = allAgents.slice(0, CLIENTS.length);
    await warmUpJit(upstream.url, `${twokey.url}/mcp`, minimal?.url ?? null, allAgents.slice(CLIENTS.length));
    for (const [row, count] of CLIENTS.entries()) {
      const agent = rowAgents[row];
      const direct = await Promise.all(Array.from({ length: count }, () => connect(upstream.url, { authorization: `Bearer ${TOKEN}` })));
      const gated = await Promise.all(Array.from({ length: count }, () => connect(`${twokey.url}/mcp`, { authorization: `Bearer ${agent!.apiKey}` })));
      const floor = minimal ? await Promise.all(Array.from({ length: count }, () => connect(minimal.url, {}))) : [];
      // Warm-up: connections, JIT, the upstream client inside twokey.
      await measure(direct, 'read_note', WARMUP);
      await measure(gated, 'notes_read_note', WARMUP);
      if (minimal) await measure(floor, 'read_note', WARMUP);
      const ways: Way[] = [
        { clients: direct, tool: 'read_note' },
        { clients: gated, tool: 'notes_read_note', pid: twokey.pid },
        ...(minimal ? [{ clients: floor, tool: 'read_note', pid: minimal.pid }] : []),
      ];
      const [straight, through, least] = (await measureInTurns(ways, CALLS)) as [Measured, Measured, Measured?];
      const twokeyCpuMsPerCall = through.cpuMsPerCall;
      const d = percentiles(straight.latencies);
      const t = percentiles(through.latencies);
      rows.push({
        database: database.kind,
        clients: count,
        calls: CALLS,
        directMs: d,
        twokeyMs: t,
        addedMs: { p50: t.p50 - d.p50, p99: t.p99 - d.p99 },
        directCallsPerSecond: round(straight.callsPerSecond),
        twokeyCallsPerSecond: round(through.callsPerSecond),
        twokeyCpuMsPerCall: round(twokeyCpuMsPerCall, 2),
        minimal: least ? minimalRow(percentiles(least.latencies), d, least.callsPerSecond, least.cpuMsPerCall) : null,
      });
      await Promise.all([...direct, ...gated, ...floor].map((client) => client.close()));
    }
  } finally {
    await minimal?.stop();
    await twokey.stop();
    await database.drop();
    await upstream.close();
  }
  return rows;
}

const rows = await benchOn(process.env.DATABASE_URL || undefined);
console.log('\nMCP tools/call of a read-only upstream tool, direct vs through twokey (ms, p50 / p99)\n');
console.log('| database   | clients | direct p50 / p99 | via twokey p50 / p99 | added p50 / p99 | calls/s direct | calls/s via twokey | twokey CPU ms/call |');
console.log('|------------|--------:|-----------------:|---------------------:|----------------:|---------------:|-------------------:|-------------------:|');
for (const row of rows) {
  console.log(
    `| ${row.database.padEnd(10)} | ${String(row.clients).padStart(7)} | ${show(row.directMs).padStart(16)} | ${show(row.twokeyMs).padStart(20)} | ${`${round(row.addedMs.p50, 1)} / ${round(row.addedMs.p99, 1)}`.padStart(15)} | ${String(row.directCallsPerSecond).padStart(14)} | ${String(row.twokeyCallsPerSecond).padStart(18)} | ${String(row.twokeyCpuMsPerCall).padStart(18)} |`,
  );
}
const floorRows = rows.flatMap((row) => (row.minimal ? [{ ...row, minimal: row.minimal }] : []));
if (floorRows.length > 0) {
  console.log('\nThe minimal pass-through (fastify, two autocommitted statements, undici), same run (ms, p50 / p99)\n');
  console.log('| database   | clients | minimal p50 / p99 | added p50 / p99 | calls/s | CPU ms/call |');
  console.log('|------------|--------:|------------------:|----------------:|--------:|------------:|');
  for (const row of floorRows) {
    console.log(
      `| ${row.database.padEnd(10)} | ${String(row.clients).padStart(7)} | ${show(row.minimal.ms).padStart(17)} | ${`${round(row.minimal.addedMs.p50, 1)} / ${round(row.minimal.addedMs.p99, 1)}`.padStart(15)} | ${String(row.minimal.callsPerSecond).padStart(7)} | ${String(row.minimal.cpuMsPerCall).padStart(11)} |`,
    );
  }
}
console.log(`\nwritten to ${await recordResults('mcp', rows)}`);
