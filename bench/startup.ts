/**
 * `npm run bench:startup`: how long `twokey serve` takes from spawn to its first 200 on /readyz, on an
 * existing embedded database, launched from the TypeScript sources through tsx
 * (scripts/twokey-from-source.js, what tests and development run) and from the build (bin/twokey.js,
 * what `npm start` and an installed package run). The two alternate, so both see the same machine load.
 * Needs `npm run build` first. RUNS=N sets the runs per launcher (default 7).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/support/processes.js';
import { sleep } from './support/stats.js';

const launchers = {
  'tsx (sources)': fileURLToPath(new URL('../scripts/twokey-from-source.js', import.meta.url)),
  'compiled (dist)': fileURLToPath(new URL('../bin/twokey.js', import.meta.url)),
};
const runs = Number(process.env.RUNS ?? 7);

/** CPU seconds (user + system) a process has used so far, in ms: unlike wall time, barely moved by other load. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function startAndStop(launcher: string, dataDir: string): Promise<{ wallMs: number; cpuMs: number }> {
  const port = await freePort();
  const { DATABASE_URL: _unused, TWOKEY_CONFIG: _default, ...inherited } = process.env;
  const started = performance.now();
  const child = spawn(process.execPath, [launcher, 'serve'], {
    env: { ...inherited, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', TWOKEY_DATA_DIR: dataDir },
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

const dataDir = await mkdtemp(join(tmpdir(), 'twokey-startup-'));
try {
  await startAndStop(launchers['compiled (dist)'], dataDir); // initdb and migrations: not measured
  const times: Record<string, { wallMs: number; cpuMs: number }[]> = Object.fromEntries(Object.keys(launchers).map((name) => [name, []]));
  for (let run = 0; run < runs; run += 1) {
    for (const [name, launcher] of Object.entries(launchers)) times[name]!.push(await startAndStop(launcher, dataDir));
  }
  const describe = (samples: number[]) => {
    const sorted = [...samples].sort((a, b) => a - b);
    return `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms (min ${sorted[0]!.toFixed(0)}, max ${sorted.at(-1)!.toFixed(0)})`;
  };
  console.log(`start-up on an existing embedded database, ${runs} runs each, spawn → first 200 on /readyz`);
  for (const [name, samples] of Object.entries(times)) {
    console.log(`${name.padEnd(16)} wall ${describe(samples.map((s) => s.wallMs))}; CPU ${describe(samples.map((s) => s.cpuMs))}`);
  }
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
