import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './processes.js';

const run = promisify(execFile);

/**
 * A PostgreSQL cluster of a test's own, which the test may stop and start again (the machine's
 * shared server must never be stopped). `initdb` and `pg_ctl` live beside the server binary, which
 * Debian keeps off the PATH; the server refuses to run as root, so everything runs as the
 * `postgres` user through `runuser`.
 */
export interface PrivatePostgres {
  port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres`, trust authentication. */
  url: string;
  /** `immediate` is a crash: no checkpoint, every connection dropped, WAL replayed at the next start. */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  start(): Promise<void>;
  /** Stops the cluster (if running) and deletes its directory. Safe to call twice. */
  destroy(): Promise<void>;
}

/** Where initdb and pg_ctl are: beside `postgres` on the PATH, else pg_config's bindir, else Debian's newest. */
function serverBinDir(): string {
  const candidates: string[] = [];
  try {
    candidates.push(dirname(realpathSync(execFileSync('sh', ['-c', 'command -v postgres'], { encoding: 'utf8' }).trim())));
  } catch {
    // not on the PATH
  }
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // no pg_config
  }
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => join(debian, version, 'bin')));
  }
  const found = candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')));
  if (!found) throw new Error(`no PostgreSQL server binaries (initdb, pg_ctl) found in ${candidates.join(', ') || 'any known place'}`);
  return found;
}

/** The `postgres` user must reach its directory: every parent needs the execute bit for others. */
function checkReachable(dir: string): void {
  for (let parent = dirname(dir); parent !== dirname(parent); parent = dirname(parent)) {
    if ((statSync(parent).mode & 0o001) === 0) {
      throw new Error(`${parent} is not searchable by other users, so the postgres user cannot reach ${dir}; set TMPDIR to a directory it can reach`);
    }
  }
}

function userIds(name: string): { uid: number; gid: number } {
  return {
    uid: Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim()),
  };
}

const asPostgres = (bin: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', bin, ...args], { timeout: 120_000 });

/** Clusters still running when the test process exits (a failed test, an interrupted run) are stopped. */
const running = new Set<() => void>();
process.once('exit', () => {
  for (const stop of running) stop();
});

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = serverBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'twokey-private-pg-'));
  checkReachable(dir);
  const { uid, gid } = userIds('postgres');
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const port = await freePort();
  const pgCtl = join(bin, 'pg_ctl');
  // Only loopback, the socket in our own directory, and no fsync: the faults here kill processes,
  // never the machine, so what PostgreSQL wrote is in the page cache either way.
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`;
  const stopNow = () => {
    try {
      execFileSync('runuser', ['-u', 'postgres', '--', pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore', timeout: 30_000 });
    } catch {
      // not running
    }
  };

  let destroyed = false;
  const cluster: PrivatePostgres = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async start() {
      await asPostgres(pgCtl, ['-D', data, '-o', serverOptions, '-l', join(dir, 'server.log'), '-w', '-t', '90', 'start']);
      running.add(stopNow);
    },
    async stop(mode = 'immediate') {
      await asPostgres(pgCtl, ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
      running.delete(stopNow);
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      stopNow();
      running.delete(stopNow);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await asPostgres(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-sync']);
    await cluster.start();
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
  return cluster;
}
