import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PROCESS_TEST_TIMEOUT_MS } from '../support/processes.js';

const HANG_GUARD_MS = 60_000;
const fixture = fileURLToPath(new URL('./fixtures/blocked-loop.ts', import.meta.url));

async function runBlocked(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // Should the watchdog not end it, a blocked child would spin forever: SIGTERM it (not SIGKILL, which is
  // what the watchdog sends) so the test fails and leaves nothing behind. It bounds a hang; it measures nothing.
  const hang = setTimeout(() => child.kill('SIGTERM'), HANG_GUARD_MS);
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  clearTimeout(hang);
  return { code, signal, stdout, stderr };
}

describe('the event-loop watchdog', () => {
  it(
    'ends a process whose loop stays blocked past TWOKEY_WATCHDOG_SECONDS, with one fatal log line, so a supervisor restarts it',
    async () => {
      const run = await runBlocked({ TWOKEY_WATCHDOG_SECONDS: '1' });
      expect(run).toMatchObject({ code: null, signal: 'SIGKILL' });
      const lines = run.stdout.split('\n').filter((line) => line.startsWith('{'));
      expect(lines).toHaveLength(1);
      const line = JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
      expect(line).toMatchObject({ level: 60, component: 'watchdog', limitMs: 1000, msg: expect.stringContaining('TWOKEY_WATCHDOG_SECONDS') });
      expect(line['blockedMs']).toBeGreaterThan(1000);
      expect(run.stdout).not.toContain('unblocked');
    },
    PROCESS_TEST_TIMEOUT_MS,
  );

  it(
    'is off at 0: a loop blocked for a while is left alone and the process ends by itself',
    async () => {
      const run = await runBlocked({ TWOKEY_WATCHDOG_SECONDS: '0', BLOCK_MS: '3000' });
      expect(run).toMatchObject({ code: 0, signal: null });
      expect(run.stdout).toBe('blocking\nunblocked\n');
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
