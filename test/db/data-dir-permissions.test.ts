import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, pgliteDirectory } from '../../src/db/database.js';

/** Every path under `root` with its permission bits, for a readable failure message. */
async function modes(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = { '.': ((await stat(root)).mode & 0o777).toString(8) };
  for (const entry of await readdir(root, { withFileTypes: true, recursive: true })) {
    const full = join(entry.parentPath, entry.name);
    if (entry.isFile() || entry.isDirectory()) found[full.slice(root.length + 1)] = ((await stat(full)).mode & 0o777).toString(8);
  }
  return found;
}

describe('the embedded database on disk', () => {
  let parent: string;
  let previousUmask: number;

  beforeEach(async () => {
    parent = await mkdtemp(join(tmpdir(), 'twokey-perm-'));
    // The worst umask an operator may run under: without care every file would be 0666.
    previousUmask = process.umask(0);
  });
  afterEach(async () => {
    process.umask(previousUmask);
    await rm(parent, { recursive: true, force: true });
  });

  it('creates the data directory 0700 and every database file 0600, whatever the umask', { timeout: 180_000 }, async () => {
    const dataDir = join(parent, 'data');
    const database = await openDatabase({ dataDir });
    try {
      await database.db.execute('create table probe (id int)');
      expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
      const pglite = await modes(pgliteDirectory(dataDir));
      expect(Object.keys(pglite).length).toBeGreaterThan(10);
      const open = Object.entries(pglite).filter(([, mode]) => (Number.parseInt(mode, 8) & 0o077) !== 0);
      expect(open).toEqual([]);
      expect(pglite['.']).toBe('700');
      expect(pglite['PG_VERSION']).toBe('600');
    } finally {
      await database.close();
    }
    // The umask twokey set while PGlite started is the caller's again.
    expect(process.umask()).toBe(0);
  });
});
