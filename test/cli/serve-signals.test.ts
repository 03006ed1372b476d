import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataDirLockFile } from '../../src/db/data-dir-lock.js';
import { binPath, freePort, PROCESS_TEST_TIMEOUT_MS, scratchDataDir } from '../support/processes.js';

// A stop asked for while the server is still starting is honoured once it has started, not by the
// signal's default action (which would end the process mid-start, requests it had taken cut off).
describe('twokey serve, stopped while it starts', { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  let removeDataDir: () => Promise<void>;
  let dataDir: string;
  beforeAll(async () => {
    ({ dataDir, remove: removeDataDir } = await scratchDataDir('twokey-serve-signals-'));
  });
  afterAll(async () => {
    await removeDataDir();
  });

  it('closes and exits 0 after a SIGTERM sent while the embedded database was opening', async () => {
    const child = spawn(process.execPath, [binPath, 'serve'], {
      cwd: dataDir,
      env: { ...process.env, TWOKEY_DATA_DIR: dataDir, PORT: String(await freePort()), HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const closed = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
    // The data directory's lock is taken as the database starts opening: serve is running by then,
    // and a new database's initdb and migrations still lie ahead.
    while (!existsSync(dataDirLockFile(dataDir)) && child.exitCode === null) await new Promise((done) => setTimeout(done, 20));
    child.kill('SIGTERM');
    const [code, signal] = await closed;
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    // Closed, not abandoned: the directory's lock is released.
    expect(existsSync(dataDirLockFile(dataDir))).toBe(false);
  });
});
