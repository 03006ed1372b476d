import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isFresh, SERVER_INPUTS } from '../../scripts/build-freshness.js';

/**
 * The hang guard of a test that starts twokey processes. Each pays Node's start-up and, on a new
 * embedded database, initdb and the migrations; a 2-core machine at a load average of 10 (CI beside
 * `npm run bench`) stretches that several-fold, and 60 s was seen to run out there. It bounds a
 * hang; it measures nothing.
 */
export const PROCESS_TEST_TIMEOUT_MS = 240_000;

const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));

/** `twokey` from its TypeScript sources, compiled by tsx as it loads (scripts/twokey-from-source.js). */
export const sourceBinPath = fileURLToPath(new URL('../../scripts/twokey-from-source.js', import.meta.url));

/**
 * The `twokey` the tests run as a user would: the build (bin/twokey.js, what an installed package
 * runs) when it is up to date with the sources, as after CI's install, which builds it; otherwise
 * the sources through tsx, so a test never runs a stale build. `twokey serve` starts from the build
 * in half the time and under half the CPU: tsx compiles and loads about a thousand modules one by one.
 */
export const binPath = isFresh(repositoryRoot, repositoryRoot, SERVER_INPUTS) ? fileURLToPath(new URL('../../bin/twokey.js', import.meta.url)) : sourceBinPath;

/**
 * A new, empty data directory for a twokey process, and what removes it. It is `data/` inside a temp
 * directory of its own: twokey keeps its audit key and checkpoints beside its data directory
 * (`data.audit-key.pem`, `data.audit-checkpoints`), and removing the temp directory takes them too.
 */
export async function scratchDataDir(prefix: string): Promise<{ dataDir: string; remove(): Promise<void> }> {
  const scratch = await mkdtemp(join(tmpdir(), prefix));
  const dataDir = join(scratch, 'data');
  await mkdir(dataDir);
  return { dataDir, remove: () => rm(scratch, { recursive: true, force: true }) };
}

/**
 * Where the test's twokey processes start: a folder with no `.env` and no `twokey.config.yaml`, so
 * a developer's own (both git-ignored, both read from the working directory) never reach a test.
 */
const processCwd = fileURLToPath(new URL('.', import.meta.url));

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, collecting what it printed: the one way tests run a child and read it. */
export async function runCommand(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<CliResult> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

/** Runs the real `twokey` binary as a user would. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return runCommand(process.execPath, [binPath, ...args], { cwd: processCwd, env: { ...process.env, ...env } });
}

/**
 * `twokey audit --json`, parsed, once every row committed so far is in the chain. The running
 * server's integrator places committed rows within 250 ms, and `twokey audit` lists placed rows only:
 * read straight after an action, the action's own row could be missing. `audit verify` names the
 * rows not yet placed; this asks again until there are none (bounded by the test's
 * timeout, never by a guess of how long placing takes).
 */
export async function auditOnceChained(
  env: Record<string, string>,
): Promise<Array<{ type: string; proposalId: string | null; data: Record<string, unknown> }>> {
  for (;;) {
    const verified = await runCli(['audit', 'verify'], env);
    if (verified.code !== 0) throw new Error(`twokey audit verify failed:\n${verified.stdout}${verified.stderr}`);
    // "audit chain ok: N rows (M newer rows not yet in the chain)", the parenthesis only while M > 0.
    if (!/newer rows? not yet in the chain/.test(verified.stdout)) break;
    await new Promise((done) => setTimeout(done, 50));
  }
  const audit = await runCli(['audit', '--json'], env);
  if (audit.code !== 0) throw new Error(`twokey audit failed:\n${audit.stderr}`);
  return audit.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { type: string; proposalId: string | null; data: Record<string, unknown> });
}

/** Starts `twokey serve` (the tests' own, or `bin`: an installed package's) and resolves once it answers /healthz. */
export async function startServerProcess(
  env: Record<string, string>,
  bin: string = binPath,
): Promise<{ child: ChildProcess; url: string; output: () => string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [bin, 'serve'], { cwd: processCwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://${env.HOST ?? '127.0.0.1'}:${env.PORT}`;
  const deadline = Date.now() + 240_000; // a new PGlite directory on a busy two-core machine can take minutes
  for (;;) {
    if (child.exitCode !== null) throw new Error(`twokey serve exited early:\n${output}`);
    const healthy = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (healthy) break;
    if (Date.now() > deadline) throw new Error(`twokey serve did not start:\n${output}`);
    await new Promise((done) => setTimeout(done, 100));
  }
  return {
    child,
    url,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'close');
    },
  };
}
