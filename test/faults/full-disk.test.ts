import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { binPath, freePort, PROCESS_TEST_TIMEOUT_MS } from '../support/processes.js';
import { createSmallDisk, fillUp, freeUp, type SmallDisk } from '../support/small-disk.js';

/**
 * Fault 5(d) of issue 23: the embedded database on a small filesystem that fills up while twokey
 * runs. Today's code (before the storage guard) answered 500s and kept /readyz green; and once the
 * disk was full while PostgreSQL needed a new WAL segment, its next statement spun forever on the
 * main thread (seen: /healthz unanswered for minutes at full CPU, no recovery after freeing space).
 */

/** Bounds a hang, so that a server that stops answering fails the test instead of stalling it; measures nothing. */
const HANG_GUARD_MS = 60_000;

interface Served {
  child: ChildProcess;
  url: string;
  output: () => string;
}

function spawnIn(disk: SmallDisk, args: string[], env: Record<string, string>): ChildProcess {
  const [file, fileArgs] = disk.command(process.execPath, [binPath, ...args]);
  return spawn(file, fileArgs, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

async function runIn(disk: SmallDisk, args: string[], env: Record<string, string>): Promise<string> {
  const child = spawnIn(disk, args, env);
  let stdout = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`twokey ${args.join(' ')} exited ${String(code)}`);
  return stdout;
}

async function serveIn(disk: SmallDisk, env: Record<string, string>): Promise<Served> {
  const child = spawnIn(disk, ['serve'], env);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${env.PORT}`;
  await vi.waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`twokey serve exited early:\n${output}`);
      expect((await fetch(`${url}/healthz`)).ok).toBe(true);
    },
    { timeout: PROCESS_TEST_TIMEOUT_MS, interval: 100 },
  );
  return { child, url, output: () => output };
}

describe('the embedded database on a disk that fills up', () => {
  let disk: SmallDisk;

  beforeAll(async () => {
    disk = await createSmallDisk(160);
  });
  afterAll(async () => {
    await disk?.release();
  });

  describe('twokey serve', () => {
    let served: Served;
    let apiKey: string;
    let env: Record<string, string>;

    beforeAll(async () => {
      env = {
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
        TWOKEY_DATA_DIR: `${disk.dir}/data`,
        TWOKEY_MIN_FREE_DISK_MB: '16',
        TWOKEY_CONFIG: fileURLToPath(new URL('../../twokey.example.yaml', import.meta.url)),
        LOG_LEVEL: 'info',
      };
      served = await serveIn(disk, env);
      apiKey = (await runIn(disk, ['agents', 'create', 'argus'], env)).trim().split('\n').at(-1) ?? '';
    }, PROCESS_TEST_TIMEOUT_MS);
    afterAll(async () => {
      if (served && served.child.exitCode === null) {
        served.child.kill('SIGKILL');
        await once(served.child, 'close');
      }
      // Whatever happened above, the next test starts with space.
      await freeUp(disk.pathHere('filler'));
    });

    const call = (method: 'GET' | 'POST', path: string, body?: unknown) =>
      fetch(`${served.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(HANG_GUARD_MS),
      });
    const propose = (org: string) => call('POST', '/v1/proposals', { operation: 'upgrade_plan', params: { org, plan: 'scale' } });
    const linesWith = (text: string) =>
      served
        .output()
        .split('\n')
        .filter((line) => line.includes(text));

    it(
      'refuses writes with clean 507s, keeps answering /healthz and reads, says not ready; and recovers once space is freed',
      async () => {
        const before = await propose('before');
        expect(before.status).toBe(201);
        const { id } = (await before.json()) as { id: string };
        expect((await call('GET', '/readyz')).status).toBe(200);

        await fillUp(disk.pathHere('filler'));
        // Writes racing the fill: each one answered, accepted or refused cleanly, never a 500, never a hang.
        const burst = await Promise.all(Array.from({ length: 20 }, (_, n) => propose(`burst-${n}`)));
        for (const answer of burst) expect([201, 507]).toContain(answer.status);

        await vi.waitFor(async () => expect((await call('GET', '/readyz')).status).toBe(503), { timeout: HANG_GUARD_MS, interval: 200 });
        expect(await (await call('GET', '/readyz')).json()).toMatchObject({ status: 'not_ready', reason: expect.stringContaining('storage') });
        const refused = await propose('while-full');
        expect(refused.status).toBe(507);
        expect(await refused.json()).toMatchObject({ error: { code: 'insufficient_storage', message: expect.stringContaining('disk space') } });
        expect((await call('GET', '/healthz')).status).toBe(200);
        expect((await call('GET', `/v1/proposals/${id}`)).status).toBe(200);
        // Loud once, not once per refused request.
        expect(linesWith('short of disk space')).toHaveLength(1);
        expect(linesWith('"level":50').filter((line) => !line.includes('short of disk space') && !line.includes('stopped on a fatal error'))).toEqual([]);

        await freeUp(disk.pathHere('filler'));
        await vi.waitFor(async () => expect((await call('GET', '/readyz')).status).toBe(200), { timeout: HANG_GUARD_MS, interval: 200 });
        expect((await propose('after')).status).toBe(201);
        expect(linesWith('disk space is back').length + linesWith('open again').length).toBe(1);
        expect(linesWith('unhandled error')).toEqual([]);

        served.child.kill('SIGTERM');
        const [code] = (await once(served.child, 'close')) as [number | null];
        expect(code).toBe(0);
      },
      PROCESS_TEST_TIMEOUT_MS,
    );

    it(
      'starts on a disk already short of space: serves reads, refuses writes, not ready; ready once space is freed',
      async () => {
        // Below TWOKEY_MIN_FREE_DISK_MB (16) but not full: PGlite opens, twokey must notice at start.
        await fillUp(disk.pathHere('filler'), 8 * 1024 * 1024);
        served = await serveIn(disk, env);
        expect(await (await call('GET', '/readyz')).json()).toEqual({ status: 'not_ready', reason: expect.stringContaining('storage') });
        expect((await propose('at-start')).status).toBe(507);
        expect((await call('GET', '/v1/operations')).status).toBe(200);
        expect(linesWith('short of disk space')).toHaveLength(1);

        await freeUp(disk.pathHere('filler'));
        await vi.waitFor(async () => expect((await call('GET', '/readyz')).status).toBe(200), { timeout: HANG_GUARD_MS, interval: 200 });
        expect((await propose('after-start')).status).toBe(201);
      },
      PROCESS_TEST_TIMEOUT_MS,
    );
  });

  it(
    'a full disk while PostgreSQL needs a new WAL segment (a PANIC) is refused at once, never spins, and the database reopens with its data',
    async () => {
      const fixture = fileURLToPath(new URL('./fixtures/wal-panic.ts', import.meta.url));
      const [file, args] = disk.command(process.execPath, ['--import', 'tsx', fixture, `${disk.dir}/panic`]);
      const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      // A spinning backend blocks the child's event loop for good: only a kill from here ends it.
      const hang = setTimeout(() => child.kill('SIGKILL'), HANG_GUARD_MS);
      const [code, signal] = (await once(child, 'close')) as [number | null, string | null];
      clearTimeout(hang);
      expect({ code, signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' });
      expect(JSON.parse(stdout)).toEqual({
        filled: expect.any(Number),
        walTransaction: 'insufficient_storage',
        read: 'insufficient_storage',
        write: 'insufficient_storage',
        problemWhileFull: expect.stringContaining('stopped'),
        rowsAfter: [1, 3],
        problemAfter: null,
        logs: [expect.stringContaining('stopped on a fatal error'), expect.stringContaining('open again')],
      });
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
