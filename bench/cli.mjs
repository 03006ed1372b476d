/**
 * `npm run bench:cli`: how fast `twokey` starts, per kind of command, against `node -e 0` on the same
 * machine in the same run: `--help`, `--version`, an operator command (`agents list`) beside a running
 * embedded server (through its admin socket), and `twokey mcp` answering `initialize` over stdio
 * against that server. Each as wall time (median of RUNS, default 9, taken round-robin so every
 * command sees the same load), as a ratio to `node -e 0`, and as the modules it loaded (one more run
 * with test/support/module-log's recorder, not timed). Runs the build (bin/twokey.js): `npm run build` first.
 *
 * Targets: --help ≤ 3× node -e 0; an operator command ≤ 5×; twokey mcp initialize ≤ 5×.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../bin/twokey.js', import.meta.url));
const recorder = fileURLToPath(new URL('../test/support/module-log/register.mjs', import.meta.url));
const runs = Number(process.env.RUNS ?? 9);

if (!existsSync(fileURLToPath(new URL('../dist/bundle/main.js', import.meta.url)))) {
  console.error('bench:cli measures the build: run "npm run build" first');
  process.exit(1);
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const median = (samples) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)];

async function freePort() {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  return port;
}

/**
 * Node under a shell that reports, on stderr after it exits, the CPU time (user + system) Node used:
 * on a machine shared with other work, CPU time moves far less than wall time does.
 */
function spawnNode(args, env, stdin) {
  const script = '"$0" "$@"; status=$?; times >&2; exit $status';
  return spawn('/bin/sh', ['-c', script, process.execPath, ...args], { env, stdio: [stdin, 'pipe', 'pipe'] });
}

/** The children's line of `times`: "0m0.060000s 0m0.010000s" → 70 (ms). */
function cpuMsOf(stderr) {
  const line = stderr.trimEnd().split('\n').at(-1) ?? '';
  const [user = 0, system = 0] = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map(([, minutes, seconds]) => (Number(minutes) * 60 + Number(seconds)) * 1000);
  return user + system;
}

/** Runs a process to its end: its stdout and CPU time; throws on a non-zero exit. */
async function run(args, env, nodeOptions = []) {
  const child = spawnNode([...nodeOptions, ...args], env, 'ignore');
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(child, 'close');
  if (code !== 0) throw new Error(`${args.join(' ')} exited with ${code}:\n${stderr}`);
  return { stdout, cpuMs: cpuMsOf(stderr) };
}

const INITIALIZE = `${JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench-cli', version: '0' } },
})}\n`;

/**
 * `twokey mcp` from spawn to its answer to `initialize` on stdout (`wallMs`: what a desktop client
 * waits for); then stdin closes and it exits, after loading the MCP SDK and checking the server
 * (`exitMs`, and the CPU time, cover that too).
 */
async function mcpInitialize(env, nodeOptions = []) {
  const started = performance.now();
  const child = spawnNode([...nodeOptions, bin, 'mcp'], env, 'pipe');
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  child.stdin.write(INITIALIZE);
  const answered = new Promise((done, fail) => {
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('"id":1')) done();
    });
    child.once('close', (code) => fail(new Error(`twokey mcp exited with ${code} before answering:\n${stderr}`)));
  });
  await answered;
  const wallMs = performance.now() - started;
  child.stdin.end();
  await once(child, 'close');
  return { wallMs, exitMs: performance.now() - started, cpuMs: cpuMsOf(stderr) };
}

/** Every file a run loaded, ES modules and CommonJS alike, counted once. */
async function modulesLoaded(measure, dir, name) {
  const log = join(dir, `modules-${name.replace(/\W+/g, '-')}.txt`);
  await measure({ TWOKEY_MODULE_LOG: log }, ['--import', recorder]);
  return new Set((await readFile(log, 'utf8')).split('\n').filter(Boolean)).size;
}

const dir = await mkdtemp(join(tmpdir(), 'twokey-bench-cli-'));
const port = await freePort();
const { DATABASE_URL: _database, TWOKEY_CONFIG: _config, ...inherited } = process.env;
const base = { ...inherited, TWOKEY_DATA_DIR: join(dir, 'data'), TWOKEY_CONFIG: '', HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn' };
const server = spawn(process.execPath, [bin, 'serve'], { env: base, stdio: ['ignore', 'ignore', 'pipe'] });
let serverErrors = '';
server.stderr.on('data', (chunk) => (serverErrors += chunk));
try {
  for (;;) {
    if (server.exitCode !== null) throw new Error(`twokey serve exited:\n${serverErrors}`);
    if (
      await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await sleep(50);
  }
  const apiKey = (await run([bin, 'agents', 'create', 'bench'], base)).stdout.trim().split('\n').at(-1);
  const mcpEnv = { ...inherited, TWOKEY_URL: `http://127.0.0.1:${port}`, TWOKEY_AGENT_KEY: apiKey };

  /** name → one measured run, with extra environment and node options (the recorder's). */
  const commands = {
    'node -e 0': (extra = {}, options = []) => run([...options, '-e', '0'], { ...inherited, ...extra }),
    'twokey --help': (extra = {}, options = []) => run([bin, '--help'], { ...base, ...extra }, options),
    'twokey --version': (extra = {}, options = []) => run([bin, '--version'], { ...base, ...extra }, options),
    'twokey agents list (admin socket)': (extra = {}, options = []) => run([bin, 'agents', 'list'], { ...base, ...extra }, options),
    'twokey mcp → initialize': (extra = {}, options = []) => mcpInitialize({ ...mcpEnv, ...extra }, options),
  };
  const times = Object.fromEntries(Object.keys(commands).map((name) => [name, []]));
  const cpu = Object.fromEntries(Object.keys(commands).map((name) => [name, []]));
  /** name → spawn to exit, for the commands whose wall time ends earlier (mcp: at its answer). */
  const exits = {};
  for (const measure of Object.values(commands)) await measure(); // warm the file cache: not measured
  for (let round = 0; round < runs; round += 1) {
    for (const [name, measure] of Object.entries(commands)) {
      const started = performance.now();
      const { cpuMs, wallMs = performance.now() - started, exitMs } = await measure();
      times[name].push(wallMs);
      cpu[name].push(cpuMs);
      if (exitMs !== undefined) (exits[name] ??= []).push(exitMs);
    }
  }
  const baseline = median(times['node -e 0']);
  const cpuBaseline = median(cpu['node -e 0']);
  const targets = { 'twokey --help': 3, 'twokey agents list (admin socket)': 5, 'twokey mcp → initialize': 5 };
  console.log(`twokey CLI start-up (compiled build), median of ${runs} runs each, on ${process.platform} node ${process.version}`);
  console.log('wall: spawn to exit (mcp: to its answer to initialize); CPU: user + system of the whole process (mcp: until stdin closes)');
  console.log('modules: every file the whole process loaded (mcp: with the MCP SDK it loads after answering)');
  console.log(
    `${'command'.padEnd(36)} ${'wall'.padStart(8)} ${'× node'.padStart(7)} ${'CPU'.padStart(8)} ${'× node'.padStart(7)}  ${'modules'.padStart(7)}  target (wall)`,
  );
  const rows = [];
  for (const [name, measure] of Object.entries(commands)) {
    const ms = median(times[name]);
    const ratio = ms / baseline;
    const cpuMs = median(cpu[name]);
    const modules = name === 'node -e 0' ? 0 : await modulesLoaded(measure, dir, name);
    const target = targets[name] ? `≤ ${targets[name]}× ${ratio <= targets[name] ? 'met' : 'MISSED'}` : '';
    const cells = [
      `${ms.toFixed(0)} ms`.padStart(8),
      `${ratio.toFixed(2)}×`.padStart(7),
      `${cpuMs.toFixed(0)} ms`.padStart(8),
      `${(cpuMs / cpuBaseline).toFixed(2)}×`.padStart(7),
    ];
    console.log(`${name.padEnd(36)} ${cells.join(' ')}  ${String(modules).padStart(7)}  ${target}`);
    const exitMs = exits[name] ? median(exits[name]) : undefined;
    if (exitMs !== undefined)
      console.log(`${''.padEnd(36)} ${`${exitMs.toFixed(0)} ms`.padStart(8)} ${`${(exitMs / baseline).toFixed(2)}×`.padStart(7)}  to its exit`);
    rows.push({
      command: name,
      wallMs: Math.round(ms),
      ...(exitMs !== undefined ? { exitMs: Math.round(exitMs) } : {}),
      ofNode: Number(ratio.toFixed(2)),
      cpuMs: Math.round(cpuMs),
      cpuOfNode: Number((cpuMs / cpuBaseline).toFixed(2)),
      modules,
      target: targets[name] ? `<= ${targets[name]}x node -e 0` : null,
      met: targets[name] ? ratio <= targets[name] : null,
    });
  }
  // For `npm run bench`, which gathers every figure in one file.
  if (process.env.BENCH_JSON) await writeFile(process.env.BENCH_JSON, JSON.stringify({ runs, rows }));
} finally {
  server.kill('SIGTERM');
  if (server.exitCode === null) await once(server, 'close');
  await rm(dir, { recursive: true, force: true });
}
