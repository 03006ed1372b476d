/**
 * A real `twokey serve` in a process of its own (as operators run it), the database it uses, and an
 * agent's view of it over HTTP.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { callAdminSocket } from '../../src/admin/socket.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import { parseConfig } from '../../src/config/config-file.js';
import { openDatabase } from '../../src/db/database.js';
import { createServices } from '../../src/runtime/services.js';
import { freePort, scratchDataDir } from '../../test/support/processes.js';
import { sleep } from './stats.js';

const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));
const builtBin = fileURLToPath(new URL('../../bin/twokey.js', import.meta.url));
let built = false;

/**
 * The benchmark measures twokey as installed: the build. The tests' `binPath` runs the sources
 * through tsx when dist/ is older than src/, which costs two to three times the CPU per MCP call and
 * would pass for a slower twokey; so dist/ is built first if it is stale (`npm run bench` does too).
 */
function builtTwokey(): string {
  if (!built) {
    const build = spawnSync(process.execPath, ['scripts/build.js', '--if-stale'], { cwd: repositoryRoot, stdio: 'inherit' });
    if (build.status !== 0) throw new Error(`building twokey for the benchmark failed (exit ${build.status ?? build.signal})`);
    built = true;
  }
  return builtBin;
}

/** Where a twokey keeps its data: a PGlite directory, or a throwaway database on a PostgreSQL server. */
export interface BenchDatabase {
  kind: 'pglite' | 'postgres';
  dataDir: string;
  /** Set for PostgreSQL only. */
  url?: string;
  drop(): Promise<void>;
}

export async function createBenchDatabase(serverUrl: string | undefined): Promise<BenchDatabase> {
  const { dataDir, remove } = await scratchDataDir('twokey-bench-');
  if (!serverUrl) return { kind: 'pglite', dataDir, drop: remove };
  // A database of its own, so the benchmark never writes into one that matters.
  const name = `twokey_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    kind: 'postgres',
    dataDir,
    url: url.toString(),
    async drop() {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
      await remove();
    },
  };
}

export interface TwokeyProcess {
  url: string;
  pid: number;
  /** From spawn until /readyz first answered 200. */
  startupMs: number;
  stop(): Promise<void>;
}

/** `nodeArguments` go to node itself, e.g. ['--cpu-prof'] to see where a run spends its time. */
export async function startTwokeyProcess(
  database: BenchDatabase,
  configYaml: string,
  env: Record<string, string>,
  nodeArguments: string[] = [],
): Promise<TwokeyProcess> {
  const configPath = join(database.dataDir, 'bench.config.yaml');
  await writeFile(configPath, configYaml);
  const port = await freePort();
  const { DATABASE_URL: _theBenchOwn, ...inherited } = process.env;
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, [...nodeArguments, builtTwokey(), 'serve'], {
    env: {
      ...inherited,
      ...env,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      TWOKEY_DATA_DIR: database.dataDir,
      TWOKEY_CONFIG: configPath,
      ...(database.url ? { DATABASE_URL: database.url } : {}),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let errors = '';
  child.stderr?.on('data', (chunk: Buffer) => (errors = (errors + chunk.toString()).slice(-4_000)));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`twokey serve exited with ${child.exitCode}:\n${errors}`);
    if (
      await fetch(`${url}/readyz`).then(
        (response) => response.ok,
        () => false,
      )
    )
      break;
    if (performance.now() - started > 180_000) throw new Error(`twokey serve was not ready within 180 s:\n${errors}`);
    await sleep(5);
  }
  const startupMs = performance.now() - started;
  if (errors.trim()) process.stderr.write(`twokey serve warned at start:\n${errors}\n`);
  return {
    url,
    pid: child.pid ?? 0,
    startupMs,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'close');
    },
  };
}

export interface BenchAgent {
  id: string;
  apiKey: string;
}

/** Creates agents the way an operator would: through the admin socket on PGlite, on the database on PostgreSQL. */
export async function createAgents(database: BenchDatabase, configYaml: string, env: Record<string, string>, count: number): Promise<BenchAgent[]> {
  const names = Array.from({ length: count }, (_, i) => `bench-agent-${i}-${randomBytes(3).toString('hex')}`);
  if (database.kind === 'pglite') {
    const created: BenchAgent[] = [];
    for (const name of names) created.push((await callAdminSocket(database.dataDir, 'agents.create', { name })) as BenchAgent);
    return created;
  }
  const opened = await openDatabase({ databaseUrl: database.url, dataDir: database.dataDir, poolSize: 2 });
  try {
    const services = createServices({ database: opened, config: parseConfig(configYaml, env, 'bench') });
    const created: BenchAgent[] = [];
    for (const name of names) created.push((await runAdminOperation(services, 'agents.create', { name })) as BenchAgent);
    return created;
  } finally {
    await opened.close();
  }
}

interface ProposalView {
  id: string;
  status: string;
  error?: unknown;
}

/** What an agent does over HTTP: propose, then long-poll until the proposal settles. */
export function agentClient(baseUrl: string, agent: BenchAgent) {
  const headers = { authorization: `Bearer ${agent.apiKey}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const answer = (await response.json()) as Record<string, unknown>;
    if (response.status >= 400) throw new Error(`${method} ${path} answered ${response.status}: ${JSON.stringify(answer)}`);
    return answer;
  };
  return {
    async propose(operation: string, params: Record<string, unknown>): Promise<string> {
      return String((await call('POST', '/v1/proposals', { operation, params })).id);
    },
    async cancel(id: string): Promise<void> {
      await call('POST', `/v1/proposals/${id}/cancel`, {});
    },
    /** Long-polls until the proposal reaches `wanted`; fails on any other settled status. */
    async until(id: string, wanted: string): Promise<void> {
      for (;;) {
        const view = (await call('GET', `/v1/proposals/${id}?wait=30`)) as unknown as ProposalView;
        if (view.status === wanted) return;
        if (['committed', 'failed', 'rejected', 'expired', 'cancelled'].includes(view.status)) {
          throw new Error(`proposal ${id} ended ${view.status}, not ${wanted}: ${JSON.stringify(view.error ?? null)}`);
        }
      }
    },
  };
}

export type AgentClient = ReturnType<typeof agentClient>;
