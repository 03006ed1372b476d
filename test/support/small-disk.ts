import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { open, rm } from 'node:fs/promises';
import { mkdtempSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A small filesystem a test can fill: a tmpfs of `sizeMiB`. As root it is mounted here, and
 * unmounted by `release()` — or, should the test process end first, on its way out. Where mounting
 * is refused (not root), a user and mount namespace of its own gets the tmpfs instead (unprivileged
 * user namespaces): a holder process keeps the namespace, processes run inside it through `nsenter`,
 * and the test reaches the files through `/proc/<holder>/root`. The namespace, and its tmpfs, end
 * with the holder.
 */
export interface SmallDisk {
  /** Where the small filesystem is, as the processes started by `command` see it. */
  dir: string;
  how: 'tmpfs mounted as root' | 'tmpfs in a user namespace';
  /** `[file, args]` that run `file args` with the small filesystem at `dir`. */
  command(file: string, args: string[]): [string, string[]];
  /** A path on the small filesystem, as this process reaches it. */
  pathHere(relative: string): string;
  release(): Promise<void>;
}

const mountTmpfs = (dir: string, sizeMiB: number) =>
  spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m,mode=0700`, 'tmpfs', dir], { encoding: 'utf8' });

function unmount(dir: string): void {
  // Lazy, so a process still holding a file cannot keep the mount (and the test) alive.
  spawnSync('umount', ['-l', dir]);
}

export async function createSmallDisk(sizeMiB: number): Promise<SmallDisk> {
  const dir = mkdtempSync(join(tmpdir(), 'twokey-small-disk-'));
  const mounted = mountTmpfs(dir, sizeMiB);
  if (mounted.status === 0) {
    const onExit = () => unmount(dir);
    process.once('exit', onExit);
    return {
      dir,
      how: 'tmpfs mounted as root',
      command: (file, args) => [file, args],
      pathHere: (relative) => join(dir, relative),
      async release() {
        process.removeListener('exit', onExit);
        unmount(dir);
        rmdirSync(dir);
      },
    };
  }
  return namespacedSmallDisk(dir, sizeMiB, mounted.stderr.trim());
}

async function namespacedSmallDisk(dir: string, sizeMiB: number, mountRefusal: string): Promise<SmallDisk> {
  const holder: ChildProcess = spawn(
    'unshare',
    ['--user', '--map-root-user', '--mount', 'sh', '-c', `mount -t tmpfs -o size=${sizeMiB}m tmpfs "$0" && echo ready && exec sleep 100000`, dir],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  holder.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  holder.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  while (!output.includes('ready')) {
    if (holder.exitCode !== null || holder.signalCode !== null) {
      rmdirSync(dir);
      throw new Error(`cannot make a small filesystem: mount refused (${mountRefusal}), and no user namespace either (${output.trim()})`);
    }
    await new Promise((done) => setTimeout(done, 20));
  }
  const pid = holder.pid as number;
  const onExit = () => holder.kill('SIGKILL');
  process.once('exit', onExit);
  return {
    dir,
    how: 'tmpfs in a user namespace',
    command: (file, args) => ['nsenter', ['--target', String(pid), '--user', '--mount', '--preserve-credentials', file, ...args]],
    pathHere: (relative) => join(`/proc/${pid}/root`, dir, relative),
    async release() {
      process.removeListener('exit', onExit);
      holder.kill('SIGKILL');
      if (holder.exitCode === null && holder.signalCode === null) await once(holder, 'exit');
      rmdirSync(dir);
    },
  };
}

/** Writes `path` until the filesystem is full (to the last 4 KiB block), then gives back `leaveBytes`; returns the bytes it holds. */
export async function fillUp(path: string, leaveBytes = 0): Promise<number> {
  const file = await open(path, 'a');
  let written = 0;
  try {
    for (const size of [1024 * 1024, 4096]) {
      const chunk = Buffer.alloc(size, 0x2a);
      for (;;) {
        try {
          written += (await file.write(chunk)).bytesWritten;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
    if (leaveBytes > 0) {
      written = Math.max(0, written - leaveBytes);
      await file.truncate(written);
    }
  } finally {
    await file.close();
  }
  return written;
}

export const freeUp = (path: string) => rm(path, { force: true });
