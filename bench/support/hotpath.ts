/**
 * The figures that say how close twokey runs to its database: the minimal raw propose + commit
 * cycle (the two transactions any such gateway must run), twokey's core cycle over HTTP (no chat),
 * AGP `open` execute on the echo business, and twokey's own CPU time per cycle.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { Pool } from 'undici';
import { callAdminSocket } from '../../src/admin/socket.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import { parseConfig } from '../../src/config/config-file.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { createServices } from '../../src/runtime/services.js';
import { percentiles, round, runConcurrently } from './stats.js';
import type { BenchAgent, BenchDatabase } from './twokey-process.js';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system, fields 14 and 15 of /proc/<pid>/stat) a process has used so far. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Field 2 (the command) may hold spaces; every field after it follows the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** Runs `work` and returns its result with the CPU milliseconds `pid` spent meanwhile. */
export async function withCpu<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; cpuMs: number }> {
  const before = await cpuSeconds(pid);
  const result = await work();
  return { result, cpuMs: ((await cpuSeconds(pid)) - before) * 1000 };
}

const rows = <T>(result: unknown): T[] => (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];

/**
 * The least a propose + commit can cost: insert the proposal and its audit row in one transaction,
 * then consume it and write the commit's audit row in another. Raw SQL through the same driver and
 * pool size as `twokey serve`.
 */
export async function minimalCycles(database: BenchDatabase, configYaml: string, env: Record<string, string>, concurrency: number, cycles: number) {
  const target: Database = await openDatabase({
    databaseUrl: database.url,
    dataDir: database.url ? database.dataDir : `${database.dataDir}-minimal`,
    poolSize: 10,
  });
  try {
    const services = createServices({ database: target, config: parseConfig(configYaml, env, 'bench') });
    const { agent } = await services.agents.create({ name: `bench-minimal-${randomBytes(3).toString('hex')}` });
    const cycle = async () => {
      const id = `prop_min_${randomBytes(9).toString('hex')}`;
      const now = new Date().toISOString();
      await target.db.transaction(async (tx) => {
        await tx.execute(sql`insert into proposals (id, agent_id, operation, params, params_hash, summary, summary_hash, confirmation_type, token_hash, status, quorum, commit_mode, created_at, expires_at, updated_at)
          values (${id}, ${agent.id}, 'bench_core', '{"n":1}'::jsonb, ${randomBytes(32).toString('hex')}, 'bench', ${randomBytes(32).toString('hex')}, 'generic', ${randomBytes(32).toString('hex')}, 'approved', 1, 'agent', ${now}, ${now}::timestamptz + interval '1 hour', ${now})`);
        await tx.execute(
          sql`insert into audit_events (at, type, actor, proposal_id, agent_id, data) values (${now}, 'proposal.created', ${agent.id}, ${id}, ${agent.id}, '{}'::jsonb)`,
        );
      });
      await target.db.transaction(async (tx) => {
        const consumed = rows<{ id: string }>(
          await tx.execute(
            sql`update proposals set consumed_at = now(), status = 'committed', updated_at = now() where id = ${id} and consumed_at is null returning id`,
          ),
        );
        if (consumed.length !== 1) throw new Error('minimal cycle: the proposal was not consumed');
        await tx.execute(
          sql`insert into audit_events (at, type, actor, proposal_id, agent_id, data) values (now(), 'proposal.committed', ${agent.id}, ${id}, ${agent.id}, '{}'::jsonb)`,
        );
      });
    };
    for (let i = 0; i < 20; i += 1) await cycle();
    const seconds = await runConcurrently(cycles, concurrency, cycle);
    return { concurrency, cycles, cyclesPerSecond: round(cycles / seconds) };
  } finally {
    await target.close();
  }
}

/** Approves the way `twokey proposals approve` does: on the database itself on PostgreSQL, over the admin socket on PGlite. */
export async function createApprover(database: BenchDatabase, configYaml: string, env: Record<string, string>) {
  if (database.kind === 'pglite') {
    return { approve: (id: string) => callAdminSocket(database.dataDir, 'proposals.approve', { id, as: 'web:bench' }), close: async () => {} };
  }
  const opened = await openDatabase({ databaseUrl: database.url, dataDir: database.dataDir, poolSize: 10 });
  const services = createServices({ database: opened, config: parseConfig(configYaml, env, 'bench') });
  return { approve: (id: string) => runAdminOperation(services, 'proposals.approve', { id, as: 'web:bench' }), close: () => opened.close() };
}

async function post(url: string, apiKey: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as Record<string, unknown>;
  if (response.status >= 300) throw new Error(`${url} answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer;
}

/**
 * What the database's busy backends wait on while `work` runs: every 20 ms, the active backends of
 * the bench database, and of those the ones waiting for a lock (a row, a transaction id, an advisory
 * lock). A global lock shows up here as a large share of lock waits.
 */
export async function sampleLockWaits<T>(
  url: string,
  work: () => Promise<T>,
): Promise<{ result: T; activeSamples: number; lockWaitShare: number; byEvent: Record<string, number> }> {
  const sampler = postgres(url, { max: 1, onnotice: () => {} });
  let active = 0;
  const byEvent: Record<string, number> = {};
  let running = true;
  const sampling = (async () => {
    while (running) {
      const rows = await sampler<Array<{ wait_event_type: string | null; wait_event: string | null; n: number }>>`
        select wait_event_type, wait_event, count(*)::int as n from pg_stat_activity
        where datname = current_database() and state = 'active' and pid <> pg_backend_pid()
        group by 1, 2`;
      for (const row of rows) {
        active += row.n;
        if (row.wait_event_type === 'Lock') byEvent[row.wait_event ?? 'lock'] = (byEvent[row.wait_event ?? 'lock'] ?? 0) + row.n;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  try {
    const result = await work();
    return { result, activeSamples: active, lockWaitShare: active ? round(Object.values(byEvent).reduce((a, b) => a + b, 0) / active, 3) : 0, byEvent };
  } finally {
    running = false;
    await sampling;
    await sampler.end();
  }
}

/** Propose → approve (CLI path) → commit with the token, echo executor, no chat. */
export async function coreCycles(
  urls: string[],
  agents: BenchAgent[],
  approve: (id: string) => Promise<unknown>,
  concurrency: number,
  cycles: number,
  warmUp = 20,
) {
  const cycle = async (i: number) => {
    const agent = agents[i % agents.length] as BenchAgent;
    // With two replicas, consecutive steps of one cycle go to different replicas, as a load balancer would send them.
    const url = urls[i % urls.length] as string;
    const commitUrl = urls[(i + 1) % urls.length] as string;
    const params = { n: i };
    const proposed = await post(`${url}/v1/proposals`, agent.apiKey, { operation: 'bench_core', params });
    await approve(String(proposed.id));
    const committed = await post(
      `${commitUrl}/v1/proposals/${String(proposed.id)}/commit`,
      agent.apiKey,
      { operation: 'bench_core', params },
      { 'x-confirmation-token': String(proposed.confirmToken) },
    );
    if (committed.status !== 'committed') throw new Error(`core cycle ended ${String(committed.status)}`);
  };
  if (warmUp > 0) await runConcurrently(warmUp, Math.min(concurrency, Math.ceil(warmUp / 10)), cycle);
  const seconds = await runConcurrently(cycles, concurrency, cycle);
  return { concurrency, cycles, cyclesPerSecond: round(cycles / seconds) };
}

/**
 * The load generator's HTTP client for the AGP figures. A keep-alive undici pool, one connection per
 * request in flight, by default: global `fetch` costs the bench process about 1 ms of CPU a request on
 * two cores, more than twokey spends on an execute, so at 16 agents it measured the client as much as
 * twokey. `BENCH_AGP_CLIENT=fetch` measures with `fetch` again, to compare.
 */
function agpClient(url: string, connections: number) {
  if (process.env.BENCH_AGP_CLIENT === 'fetch') {
    return {
      name: 'fetch',
      get: async (path: string) => void (await (await fetch(`${url}${path}`)).arrayBuffer()),
      post: (path: string, apiKey: string, body: unknown, headers: Record<string, string>) => post(`${url}${path}`, apiKey, body, headers),
      close: async () => {},
    };
  }
  const pool = new Pool(url, { connections, pipelining: 1 });
  return {
    name: 'undici pool',
    get: async (path: string) => void (await (await pool.request({ path, method: 'GET' })).body.arrayBuffer()),
    post: async (path: string, apiKey: string, body: unknown, headers: Record<string, string>) => {
      const response = await pool.request({
        path,
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      const answer = (await response.body.json()) as Record<string, unknown>;
      if (response.statusCode >= 300) throw new Error(`${path} answered ${response.statusCode}: ${JSON.stringify(answer)}`);
      return answer;
    },
    close: () => pool.close(),
  };
}

/** AGP execute on the built-in echo business under the `open` policy; added latency = p50 over the /healthz round trip. */
export async function agpOpenExecutes(
  url: string,
  agents: BenchAgent[],
  concurrency: number,
  requests: number,
  measure: (executes: () => Promise<number>) => Promise<number> = (executes) => executes(),
) {
  const client = agpClient(url, concurrency);
  const floor: number[] = [];
  await runConcurrently(requests, concurrency, async () => {
    const started = performance.now();
    await client.get('/healthz');
    floor.push(performance.now() - started);
  });
  const latencies: number[] = [];
  const execute = async (i: number) => {
    const agent = agents[i % agents.length] as BenchAgent;
    const started = performance.now();
    const answer = await client.post(
      '/agp/execute',
      agent.apiKey,
      { businessId: 'echo', request: { serviceId: 'order', items: [{ productId: 'echo-widget-1', quantity: 1 + (i % 5) }] } },
      { 'idempotency-key': `bench-${randomBytes(8).toString('hex')}` },
    );
    latencies.push(performance.now() - started);
    if (answer.status !== 'succeeded' && answer.status !== 'pending') throw new Error(`AGP execute answered ${JSON.stringify(answer)}`);
  };
  const seconds = await measure(() => runConcurrently(requests, concurrency, execute)).finally(() => client.close());
  const measured = percentiles(latencies);
  const base = percentiles(floor);
  return {
    concurrency,
    requests,
    client: client.name,
    executesPerSecond: round(requests / seconds),
    p50Ms: round(measured.p50, 2),
    p99Ms: round(measured.p99, 2),
    healthzP50Ms: round(base.p50, 2),
    addedP50Ms: round(measured.p50 - base.p50, 2),
  };
}
