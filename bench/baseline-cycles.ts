/**
 * twokey's CPU per full chat cycle at one agent (propose → Slack post → signed click → downstream →
 * committed), beside the same figure of an earlier commit measured in the same run: the target of the
 * fast path is a quarter of what `e9c8266` (the `main` of the day it was set) spends. Each side is its
 * own checkout and build, running its own `bench/run.ts` (cycles only, PostgreSQL), in alternating
 * rounds so that both see the same machine; the figure of each side is the median of its rounds.
 * This checkout's run also measures the minimal chat cycle (bench/support/minimal-chat-cycle.ts) right
 * after its own cycles: the floor of the same exchanges, so the figure says how much is twokey's own.
 *
 * The earlier commit is unpacked from this repository's history (`git archive`, so no worktree is
 * registered) into <tmpdir>/twokey-bench-baseline/<commit>, installed and built there once, and kept
 * for the next run. Not under node_modules: its TypeScript build refuses a path through one. Without that commit in the history (a shallow clone), the comparison is
 * skipped and says so.
 *
 * Knobs: BENCH_BASELINE (a commit; default e9c8266; `none` skips), BENCH_BASELINE_ROUNDS (default 2),
 * BENCH_BASELINE_CYCLES (cycles one at a time per round, default 200). Needs DATABASE_URL.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/baseline-cycles.ts
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { median, recordResults, round } from './support/stats.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const wanted = process.env.BENCH_BASELINE ?? 'e9c8266';
const rounds = Number(process.env.BENCH_BASELINE_ROUNDS ?? 2);
const cycles = process.env.BENCH_BASELINE_CYCLES ?? '200';

if (!process.env.DATABASE_URL) throw new Error('bench/baseline-cycles.ts measures on PostgreSQL: set DATABASE_URL');

/** The commit's full id, or null when this clone does not have it. */
async function resolveCommit(name: string): Promise<string | null> {
  return run('git', ['rev-parse', '--verify', '--quiet', `${name}^{commit}`], { cwd: root }).then(
    ({ stdout }) => stdout.trim(),
    () => null,
  );
}

async function inherit(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<void> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: 'inherit' });
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${code} (in ${cwd})`);
}

/** The earlier commit, unpacked, installed and built; reused from an earlier run when complete. */
async function baselineCheckout(commit: string): Promise<string> {
  const dir = join(tmpdir(), 'twokey-bench-baseline', commit);
  const ready = join(dir, '.twokey-bench-ready');
  if (
    await access(ready).then(
      () => true,
      () => false,
    )
  )
    return dir;
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  console.log(`unpacking ${commit.slice(0, 7)} into ${dir}, then npm ci (its prepare script builds it)`);
  await inherit('sh', ['-c', `git -C "${root}" archive ${commit} | tar -x -C "${dir}"`], root);
  await inherit('npm', ['ci', '--no-audit', '--no-fund'], dir);
  await writeFile(ready, `${new Date().toISOString()}\n`);
  return dir;
}

/**
 * One side's CPU ms per cycle at one agent, from the figures its own bench/run.ts wrote; with
 * `minimal`, this checkout's run also measures the minimal chat cycle right after its own cycles.
 */
async function cpuPerCycle(dir: string, minimal = false): Promise<{ twokey: number; minimal: number | null }> {
  // A temp directory of its own, removed after: an earlier commit's harness leaves its audit key and
  // checkpoints beside the data directory it made there, and cannot be changed now.
  const scratch = await mkdtemp(join(tmpdir(), 'twokey-bench-round-'));
  try {
    await inherit(process.execPath, ['--import', 'tsx', 'bench/run.ts'], dir, {
      BENCH_DRIVERS: 'postgres',
      BENCH_SECTIONS: minimal ? 'cycles,minimalchat' : 'cycles',
      BENCH_CONCURRENCY: '1',
      BENCH_SEQUENTIAL: cycles,
      TMPDIR: scratch,
    });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  type Run = Array<{ concurrency: number; cpuMsPerCycle: number }>;
  const written = JSON.parse(await readFile(join(dir, 'bench/results/latest.json'), 'utf8')) as {
    run?: { drivers?: Array<{ driver: string; cycles?: Run; minimalChat?: Run | null }> };
  };
  const driver = written.run?.drivers?.find((d) => d.driver === 'postgres');
  const figure = driver?.cycles?.find((c) => c.concurrency === 1)?.cpuMsPerCycle;
  if (figure === undefined) throw new Error(`no chat-cycle figure in ${dir}/bench/results/latest.json`);
  const floor = driver?.minimalChat?.find((c) => c.concurrency === 1)?.cpuMsPerCycle;
  if (minimal && floor === undefined) throw new Error(`no minimal chat-cycle figure in ${dir}/bench/results/latest.json`);
  return { twokey: figure, minimal: floor ?? null };
}

const commit = wanted === 'none' ? null : await resolveCommit(wanted);
if (!commit) {
  const reason = wanted === 'none' ? 'BENCH_BASELINE=none' : `commit ${wanted} is not in this clone's history`;
  console.log(`chat cycle against an earlier commit: skipped (${reason})`);
  await recordResults('chat-cycle-baseline', { skipped: reason });
} else {
  const baselineDir = await baselineCheckout(commit);
  // This checkout's own run writes its figures to bench/results/latest.json ("run"); what was there is put back.
  const resultsFile = join(root, 'bench/results/latest.json');
  const before = await readFile(resultsFile, 'utf8').catch(() => null);
  const figures = { baseline: [] as number[], current: [] as number[], minimal: [] as number[] };
  try {
    for (let roundNumber = 1; roundNumber <= rounds; roundNumber += 1) {
      figures.baseline.push((await cpuPerCycle(baselineDir)).twokey);
      const current = await cpuPerCycle(root, true);
      figures.current.push(current.twokey);
      figures.minimal.push(current.minimal!);
      console.log(
        `round ${roundNumber}: ${wanted} ${figures.baseline.at(-1)} ms, this checkout ${current.twokey} ms, the minimal chat cycle ${current.minimal} ms of CPU per cycle`,
      );
    }
  } finally {
    if (before !== null) await writeFile(resultsFile, before);
  }
  const baselineMs = round(median(figures.baseline), 2);
  const currentMs = round(median(figures.current), 2);
  const ratio = round(currentMs / baselineMs, 2);
  const minimalMs = round(median(figures.minimal), 2);
  const ofMinimal = round(currentMs / minimalMs, 2);
  console.log(`\nCPU per full chat cycle at one agent (PostgreSQL, medians of ${rounds} alternating rounds of ${cycles} cycles):`);
  console.log(`  ${wanted}: ${baselineMs} ms; this checkout: ${currentMs} ms; ratio ${ratio} (target ≤ 0.25)`);
  console.log(`  the minimal chat cycle (5 statements, 6 HTTP exchanges): ${minimalMs} ms; this checkout is ${ofMinimal} times it`);
  await recordResults('chat-cycle-baseline', {
    baseline: wanted,
    baselineCommit: commit,
    rounds,
    cycles: Number(cycles),
    figures,
    baselineMs,
    currentMs,
    ratio,
    minimalMs,
    ofMinimal,
  });
}
