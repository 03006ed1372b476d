import { join, resolve } from 'node:path';
import lockfile from 'proper-lockfile';

/**
 * The embedded database's directory lock, apart from the database itself: the CLI checks it to
 * decide whether to ask a running server over its admin socket, without loading PGlite or drizzle.
 */

/** A holder that stopped refreshing its lock this long ago has crashed. */
export const DATA_DIR_LOCK_STALE_MS = 5_000;

export const dataDirLockFile = (dataDir: string): string => join(resolve(dataDir), 'twokey.lock');

export class DataDirLockedError extends Error {
  override readonly name = 'DataDirLockedError';
  constructor(readonly dataDir: string) {
    super(
      `the data directory ${dataDir} is in use by another twokey process; stop it, or use its admin socket ` +
        '(the CLI does this by itself), or set TWOKEY_DATA_DIR to another directory',
    );
  }
}

export async function isDataDirLocked(dataDir: string): Promise<boolean> {
  return lockfile.check(resolve(dataDir), { lockfilePath: dataDirLockFile(dataDir), stale: DATA_DIR_LOCK_STALE_MS, realpath: false }).catch(() => false);
}
