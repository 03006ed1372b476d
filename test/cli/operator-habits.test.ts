/**
 * What an operator expects of the `twokey` command before anything runs: `--version`, a `.env`
 * beside them read at start (the environment winning over it), and one line `twokey: …` naming
 * the cause for every way start can fail, never a stack trace.
 */
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binPath, freePort, PROCESS_TEST_TIMEOUT_MS, runCommand, type CliResult } from '../support/processes.js';

const runningAsRoot = process.getuid?.() === 0;

/**
 * The real binary, in `cwd`, with only the environment given (plus PATH and HOME): nothing of the
 * test runner's own environment (DATABASE_URL, TWOKEY_*) leaks in. `asNobody` runs it as an
 * unprivileged user, for the permission checks root would pass.
 */
async function twokey(args: string[], options: { cwd: string; env?: Record<string, string>; asNobody?: boolean }): Promise<CliResult> {
  const env = { PATH: process.env.PATH ?? '', HOME: options.asNobody ? tmpdir() : (process.env.HOME ?? tmpdir()), ...options.env };
  const [command, commandArgs] =
    options.asNobody && runningAsRoot ? ['runuser', ['-u', 'nobody', '--', process.execPath, binPath, ...args]] : [process.execPath, [binPath, ...args]];
  return runCommand(command, commandArgs, { cwd: options.cwd, env });
}

/** A start failure as an operator must see it: exactly one line on stderr, the cause named, no stack. */
function expectOneLine(result: CliResult, line: string | RegExp, exitCode: number): void {
  expect(result.code, result.stderr).toBe(exitCode);
  expect(result.stderr.endsWith('\n')).toBe(true);
  expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  if (typeof line === 'string') expect(result.stderr.trimEnd()).toBe(line);
  else expect(result.stderr.trimEnd()).toMatch(line);
  expect(result.stderr).not.toMatch(/\n\s+at |node:internal|Node\.js v/);
}

describe('the twokey command, as an operator meets it', { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'twokey-habits-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints its version with --version and -V', async () => {
    const { version } = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const result = await twokey([flag], { cwd: dir });
      expect(result).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('reads .env from the working directory, and a variable set in the environment wins over it', async () => {
    const project = join(dir, 'project');
    await mkdir(project);
    await writeFile(join(project, '.env'), '# the operator copied .env.example and edited it\nPORT=eighty\nTWOKEY_CONFIG=from-dotenv.yaml\n');

    // The file's PORT is read (and refused, naming it): .env is not ignored.
    const fromFile = await twokey(['serve'], { cwd: project });
    expect(fromFile.code).toBe(2);
    expect(fromFile.stderr).toContain('PORT: expected an integer between 1 and 65535');

    // The environment's PORT wins; the file still fills in what the environment leaves unset.
    const overridden = await twokey(['serve'], { cwd: project, env: { PORT: String(await freePort()) } });
    expectOneLine(overridden, `twokey: cannot read the config file ${join(project, 'from-dotenv.yaml')} (TWOKEY_CONFIG): no such file or directory`, 2);
  });

  it('a busy port is one line naming the port and what to do', async () => {
    const blocker = createServer();
    blocker.listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const port = (blocker.address() as { port: number }).port;
    try {
      const result = await twokey(['serve'], {
        cwd: dir,
        env: { PORT: String(port), HOST: '127.0.0.1', TWOKEY_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn' },
      });
      expectOneLine(result, `twokey: port ${port} on 127.0.0.1 is already in use; stop the other process or set PORT`, 1);
      expect(result.stderr).not.toContain('EADDRINUSE');
    } finally {
      blocker.close();
    }
  });

  it('an unreadable config file is one line naming TWOKEY_CONFIG', async () => {
    const result = await twokey(['serve'], { cwd: dir, env: { TWOKEY_CONFIG: dir } });
    expectOneLine(result, `twokey: cannot read the config file ${dir} (TWOKEY_CONFIG): it is a directory, not a file`, 2);
  });

  it('a database that does not answer is one line naming DATABASE_URL, without its password', async () => {
    const port = await freePort();
    const result = await twokey(['serve'], { cwd: dir, env: { DATABASE_URL: `postgres://twokey:hunter2@127.0.0.1:${port}/approvals` } });
    expectOneLine(result, `twokey: cannot reach the database at 127.0.0.1:${port}/approvals (DATABASE_URL): connection refused (nothing listens there)`, 1);
    expect(result.stderr).not.toContain('hunter2');
  });

  it('a data directory twokey may not write is one line naming TWOKEY_DATA_DIR', async () => {
    // Root writes anywhere: the check runs as nobody, under a directory only root may enter.
    const locked = await mkdtemp(join(tmpdir(), 'twokey-locked-'));
    try {
      if (!runningAsRoot) await chmod(locked, 0o500);
      const dataDir = join(locked, 'data');
      const result = await twokey(['serve'], {
        cwd: tmpdir(),
        asNobody: true,
        env: { TWOKEY_DATA_DIR: dataDir, TWOKEY_AUDIT_KEY: Buffer.alloc(32, 1).toString('base64'), PORT: String(await freePort()) },
      });
      expectOneLine(result, `twokey: cannot use the data directory ${dataDir} (TWOKEY_DATA_DIR): permission denied`, 1);
    } finally {
      await rm(locked, { recursive: true, force: true });
    }
  });

  it('an audit key file that cannot be read stops start before anything listens', async () => {
    const keyDir = join(dir, 'not-a-key');
    await mkdir(keyDir);
    const result = await twokey(['serve'], {
      cwd: dir,
      env: { TWOKEY_AUDIT_KEY_FILE: keyDir, TWOKEY_DATA_DIR: join(dir, 'data2'), PORT: String(await freePort()) },
    });
    expectOneLine(result, `twokey: cannot read the audit key file ${keyDir} (TWOKEY_AUDIT_KEY_FILE): it is a directory, not a file`, 2);
    expect(result.stdout).toBe('');
  });
});
