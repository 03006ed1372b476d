/**
 * The audit key file a fleet's replicas create when they start together on one data directory: every
 * process ends up with the same key, none fails reading a file the other has created but not yet
 * written (seen as "DECODER routines::unsupported" when two replicas started at once), and nothing
 * but the key file is left behind.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOrCreateKeyFile } from '../../src/config/audit-key.js';

const module = fileURLToPath(new URL('../../src/config/audit-key.ts', import.meta.url));
// Each process waits for the same moment, then loads or creates the key and prints its public half.
const script = `
const { loadOrCreateKeyFile } = await import(${JSON.stringify(module)});
const { createPublicKey } = await import('node:crypto');
const startAt = Number(process.argv[2]);
while (Date.now() < startAt) {}
const key = loadOrCreateKeyFile(process.argv[1]);
console.log(createPublicKey(key).export({ format: 'der', type: 'spki' }).toString('base64'));
`;

async function loadInProcess(path: string, startAt: number): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, path, String(startAt)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, out: out.trim(), err };
}

describe('the audit key file', { timeout: 120_000 }, () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'twokey-audit-key-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is created once, 0600, and read back as the same key', async () => {
    const path = join(dir, 'single', 'audit-key.pem');
    const created = loadOrCreateKeyFile(path);
    expect(loadOrCreateKeyFile(path).equals(created)).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readdir(join(dir, 'single'))).toEqual(['audit-key.pem']);
  });

  it('four processes creating it at the same moment all get one key, three times over', async () => {
    for (let round = 0; round < 3; round += 1) {
      const roundDir = join(dir, `race-${round}`);
      const path = join(roundDir, 'audit-key.pem');
      // Late enough for every process to have loaded tsx and the module on a busy machine.
      const startAt = Date.now() + 4_000;
      const results = await Promise.all(Array.from({ length: 4 }, () => loadInProcess(path, startAt)));
      expect(results.map((result) => [result.code, result.err])).toEqual(results.map(() => [0, '']));
      expect(new Set(results.map((result) => result.out)).size).toBe(1);
      expect(await readdir(roundDir)).toEqual(['audit-key.pem']);
    }
  });
});
