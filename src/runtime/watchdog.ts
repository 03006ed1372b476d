import { hostname } from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * The event-loop watchdog of `twokey serve`. A blocked event loop cannot run its own timers, so the
 * watcher lives in a worker thread: the main thread bumps a shared counter from a timer, and the
 * worker, on its own loop, ends the process when the counter has not moved for longer than the
 * limit. It writes its log line straight to file descriptor 1 (a worker's `process.stdout` goes
 * through the blocked main thread) and ends the process with SIGKILL: a blocked main thread would
 * never run a SIGTERM handler, and a process-wide signal is the one thing a worker can use to end
 * its process (its `process.exit` ends only the worker). The supervisor (systemd, Docker, Kubernetes)
 * restarts it. Seen in practice: PGlite spinning in WebAssembly after a PANIC on a full disk.
 */

export interface WatchdogOptions {
  /** How long the event loop may go without turning before the process is ended. */
  limitMs: number;
  /** Where the log line goes (default: standard output, beside the other log lines). */
  logFd?: number;
}

export interface Watchdog {
  stop(): Promise<void>;
}

/** The worker's code, plain JavaScript so it runs the same from the sources and from dist/. */
const WATCHER = `
const { workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const { beats, limitMs, checkMs, logFd, pid, host } = workerData;
let seen = Atomics.load(beats, 0);
let movedAt = performance.now();
setInterval(() => {
  const now = performance.now();
  const count = Atomics.load(beats, 0);
  if (count !== seen) {
    seen = count;
    movedAt = now;
    return;
  }
  const blockedMs = Math.round(now - movedAt);
  if (blockedMs <= limitMs) return;
  const line = { level: 60, time: Date.now(), pid, hostname: host, component: 'watchdog', blockedMs, limitMs,
    msg: 'the event loop has been blocked for longer than TWOKEY_WATCHDOG_SECONDS; exiting so that the supervisor restarts twokey' };
  try { writeSync(logFd, JSON.stringify(line) + '\\n'); } finally { process.kill(pid, 'SIGKILL'); }
}, checkMs);
`;

export function startEventLoopWatchdog(options: WatchdogOptions): Watchdog {
  const beats = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  // Several beats and checks per limit, so a loop that turns is never mistaken for a blocked one.
  const tickMs = Math.max(10, Math.min(1_000, Math.floor(options.limitMs / 4)));
  const worker = new Worker(WATCHER, {
    eval: true,
    workerData: { beats, limitMs: options.limitMs, checkMs: tickMs, logFd: options.logFd ?? 1, pid: process.pid, host: hostname() },
  });
  // Neither the watcher nor the heartbeat keeps a finished process alive.
  worker.unref();
  const heartbeat = setInterval(() => Atomics.add(beats, 0, 1), tickMs);
  heartbeat.unref();
  return {
    async stop() {
      clearInterval(heartbeat);
      await worker.terminate();
    },
  };
}

/** The watchdog `TWOKEY_WATCHDOG_SECONDS` asks for, or null when it is 0 (disabled). */
export function watchdogFromEnv(env: { TWOKEY_WATCHDOG_SECONDS: number }): Watchdog | null {
  return env.TWOKEY_WATCHDOG_SECONDS > 0 ? startEventLoopWatchdog({ limitMs: env.TWOKEY_WATCHDOG_SECONDS * 1000 }) : null;
}
