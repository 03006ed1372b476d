import { execFileSync } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles, in the unit of the samples. */
export function percentiles(samples: readonly number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
  return { p50: pick(0.5), p99: pick(0.99), max: sorted.at(-1) ?? 0 };
}

/** The middle of the samples; with an even count, the mean of the two middle ones. */
export function median(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

/**
 * Runs `count` pieces of work with at most `concurrency` in flight, like that many clients each
 * sending its next request as soon as its last one finished. Returns the wall-clock seconds.
 */
export async function runConcurrently(count: number, concurrency: number, work: (index: number) => Promise<void>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      for (let index = next++; index < count; index = next++) await work(index);
    }),
  );
  return (performance.now() - started) / 1000;
}

export const round = (value: number, digits = 1): number => Number(value.toFixed(digits));

export const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/**
 * CPU time (user + system) a process has used so far, in ms, from /proc (Linux): on a shared
 * machine the work a request costs shows here when its latency is mostly other processes' turn.
 */
export async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; the fields after it are counted from its ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  return (ticks * 1000) / ticksPerSecond;
}

/**
 * CPU time every thread of a process has run so far, in ms, from /proc/<pid>/task/<tid>/schedstat
 * (Linux, in nanoseconds): precise over a window of a few dozen calls, where `cpuMs` counts whole
 * ticks of 10 ms. A thread that exited takes its time with it, so this suits a process whose threads
 * live as long as it does (Node's main thread, its compiler and GC helpers, libuv's pool).
 */
export async function threadsCpuMs(pid: number): Promise<number> {
  const threads = await readdir(`/proc/${pid}/task`);
  const nanoseconds = await Promise.all(
    threads.map((thread) =>
      readFile(`/proc/${pid}/task/${thread}/schedstat`, 'utf8').then(
        (text) => Number(text.split(' ')[0]),
        // Exited between the listing and the read.
        () => 0,
      ),
    ),
  );
  return nanoseconds.reduce((sum, value) => sum + value, 0) / 1e6;
}

/** Resident set size of a process in MiB, from /proc (Linux). */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  if (!kib) throw new Error(`no VmRSS for pid ${pid}`);
  return round(Number(kib) / 1024, 1);
}

const resultsFile = fileURLToPath(new URL('../results/latest.json', import.meta.url));

/** The commit the figures were measured on (short hash), or 'unknown' outside a git checkout. */
export function currentCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/**
 * Merges one section into bench/results/latest.json, so `npm run bench` and `npm run bench:soak`
 * (which takes ten minutes, so it runs on its own) keep one file of figures between them. Every
 * section carries the commit and the time it was measured at.
 */
export async function recordResults(section: string, figures: unknown): Promise<string> {
  const existing = await readFile(resultsFile, 'utf8').then(
    (text) => JSON.parse(text) as Record<string, unknown>,
    (): Record<string, unknown> => ({}),
  );
  const stamp = { commit: currentCommit(), at: new Date().toISOString() };
  existing[section] = figures !== null && typeof figures === 'object' && !Array.isArray(figures) ? { ...stamp, ...figures } : { ...stamp, rows: figures };
  await mkdir(new URL('../results/', import.meta.url), { recursive: true });
  await writeFile(resultsFile, `${JSON.stringify(existing, null, 2)}\n`);
  return resultsFile;
}
