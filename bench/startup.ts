/**
 * `npm run bench:startup`: how long `twokey serve` takes from spawn to its first 200 on /readyz, on an
 * existing embedded database, launched from the TypeScript sources through tsx
 * (scripts/twokey-from-source.js, what tests and development run) and from the build (bin/twokey.js,
 * what `npm start` and an installed package run). The two alternate, so both see the same machine load.
 * Needs `npm run build` first. RUNS=N sets the runs per launcher (default 7).
 *
 * In the same run: `node -e 0` (the floor: Node's own start on this machine), the target (under 1 s
 * wall from the build), the load average, and the packages the build loads up to /readyz, recorded
 * by test/support/module-log (a separate run: the recorder's hook slows loading).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { freePort, scratchDataDir } from '../test/support/processes.js';
import { median, round, sleep } from './support/stats.js';

const allLaunchers = {
  'tsx (sources)': fileURLToPath(new URL('../scripts/twokey-from-source.js', import.meta.url)),
  'compiled (dist)': fileURLToPath(new URL('../bin/twokey.js', import.meta.url)),
};
/** STARTUP_BUILD_ONLY=1 (what `npm run bench` sets) measures the build alone. */
const launchers: Partial<typeof allLaunchers> = process.env.STARTUP_BUILD_ONLY ? { 'compiled (dist)': allLaunchers['compiled (dist)'] } : allLaunchers;
const runs = Number(process.env.RUNS ?? 7);
const recorder = fileURLToPath(new URL('../test/support/module-log/register.mjs', import.meta.url));
/** Spawn → first 200 on /readyz, from the build, on this machine. */
const TARGET_WALL_MS = 1_000;

/** CPU seconds (user + system) a process has used so far, in ms: unlike wall time, barely moved by other load. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** `node -e 0`: what any Node process costs here, the floor under every figure below. */
async function bareNode(): Promise<{ wallMs: number; cpuMs: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  // Its CPU is the growth of this process's reaped children's time (/proc/PID is gone once it exits).
  const before = childrenCpuMs();
  await once(child, 'close');
  return { wallMs: performance.now() - started, cpuMs: childrenCpuMs() - before };
}

/** CPU used by this process's children that have exited and been waited for (cutime + cstime), in ms. */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

async function startAndStop(launcher: string, dataDir: string, moduleLog?: string): Promise<{ wallMs: number; cpuMs: number }> {
  const port = await freePort();
  const { DATABASE_URL: _unused, TWOKEY_CONFIG: _default, ...inherited } = process.env;
  // No chat platform: the start-up measured is the bare server's.
  for (const name of ['SLACK_BOT_TOKEN', 'SLACK_APP_TOKEN', 'SLACK_SIGNING_SECRET', 'DISCORD_BOT_TOKEN']) delete inherited[name];
  const started = performance.now();
  const child = spawn(process.execPath, [...(moduleLog ? ['--import', recorder] : []), launcher, 'serve'], {
    env: {
      ...inherited,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      TWOKEY_DATA_DIR: dataDir,
      ...(moduleLog ? { TWOKEY_MODULE_LOG: moduleLog } : {}),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`twokey serve exited with ${child.exitCode}:\n${errors}`);
    if (
      await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (response) => response.ok,
        () => false,
      )
    )
      break;
    await sleep(5);
  }
  const measured = { wallMs: performance.now() - started, cpuMs: cpuMs(child.pid!) };
  child.kill('SIGTERM');
  await once(child, 'close');
  return measured;
}

const { dataDir, remove: removeDataDir } = await scratchDataDir('twokey-startup-');
try {
  const loadBefore = loadavg();
  await startAndStop(allLaunchers['compiled (dist)'], dataDir); // initdb and migrations: not measured
  const times: Record<string, { wallMs: number; cpuMs: number }[]> = Object.fromEntries(['node -e 0', ...Object.keys(launchers)].map((name) => [name, []]));
  for (let run = 0; run < runs; run += 1) {
    times['node -e 0']!.push(await bareNode());
    for (const [name, launcher] of Object.entries(launchers)) times[name]!.push(await startAndStop(launcher!, dataDir));
  }
  const describe = (samples: number[]) => {
    const sorted = [...samples].sort((a, b) => a - b);
    return `median ${median(samples).toFixed(0)} ms (min ${sorted[0]!.toFixed(0)}, max ${sorted.at(-1)!.toFixed(0)})`;
  };
  const loadAfter = loadavg();
  const load = (figures: number[]) => figures.map((figure) => figure.toFixed(2)).join(' ');
  console.log(`start-up on an existing embedded database, ${runs} runs each, spawn → first 200 on /readyz (no chat configured)`);
  console.log(`load average (1, 5, 15 min): ${load(loadBefore)} before, ${load(loadAfter)} after`);
  for (const [name, samples] of Object.entries(times)) {
    console.log(`${name.padEnd(16)} wall ${describe(samples.map((s) => s.wallMs))}; CPU ${describe(samples.map((s) => s.cpuMs))}`);
  }
  const built = median(times['compiled (dist)']!.map((s) => s.wallMs));
  console.log(
    `target: under ${TARGET_WALL_MS} ms wall from the build: ${built < TARGET_WALL_MS ? 'met' : 'NOT met'} (median ${built.toFixed(0)} ms, ` +
      `${(built - median(times['node -e 0']!.map((s) => s.wallMs))).toFixed(0)} ms above node -e 0)`,
  );

  const medians = Object.fromEntries(
    Object.entries(times).map(([name, samples]) => [
      name,
      { wallMs: round(median(samples.map((s) => s.wallMs)), 0), cpuMs: round(median(samples.map((s) => s.cpuMs)), 0) },
    ]),
  );
  // One more start from the build, recorded: what it loads before it answers.
  const moduleLog = join(dataDir, 'modules.txt');
  await startAndStop(allLaunchers['compiled (dist)'], dataDir, moduleLog);
  const modules = [...new Set((await readFile(moduleLog, 'utf8')).split('\n').filter(Boolean))];
  const perPackage = new Map<string, number>();
  for (const url of modules) {
    const name = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? (url.includes('/dist/') ? '(twokey dist)' : '(other)');
    perPackage.set(name, (perPackage.get(name) ?? 0) + 1);
  }
  const ranked = [...perPackage].sort((a, b) => b[1] - a[1]);
  console.log(`modules loaded up to /readyz (from the build): ${modules.length} files in ${perPackage.size} packages`);
  const shown = ranked.slice(0, 30);
  console.log(shown.map(([name, count]) => `  ${String(count).padStart(4)} ${name}`).join('\n'));
  const rest = ranked.slice(shown.length);
  if (rest.length > 0) console.log(`  ${String(rest.reduce((sum, [, count]) => sum + count, 0)).padStart(4)} in ${rest.length} more packages`);
  // For `npm run bench`, which gathers every figure in one file.
  if (process.env.BENCH_JSON) {
    const figures = {
      runs,
      load: { before: loadBefore, after: loadAfter },
      medians,
      targetWallMs: TARGET_WALL_MS,
      met: built < TARGET_WALL_MS,
      modules: modules.length,
      packages: perPackage.size,
    };
    await writeFile(process.env.BENCH_JSON, JSON.stringify(figures));
  }
} finally {
  await removeDataDir();
}
