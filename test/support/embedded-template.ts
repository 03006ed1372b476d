import { createHash, randomBytes } from 'node:crypto';
import { cp, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDatabase, pgliteDirectory } from '../../src/db/database.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Names the template after what shapes it: this checkout, the migrations and PGlite's version. A
 * changed migration or a PGlite upgrade makes a new one; an old one is never reused.
 */
async function templatePath(): Promise<string> {
  const hash = createHash('sha256').update(root);
  const migrations = join(root, 'drizzle');
  for (const entry of (await readdir(migrations, { recursive: true, withFileTypes: true })).filter((e) => e.isFile())) {
    const path = join(entry.parentPath, entry.name);
    hash.update(path).update(await readFile(path));
  }
  hash.update(await readFile(join(root, 'node_modules/@electric-sql/pglite/package.json')));
  return join(tmpdir(), `twokey-test-embedded-${hash.digest('hex').slice(0, 12)}`);
}

let template: Promise<string> | undefined;

/** Creates and migrates one embedded database, once per machine and version; workers racing both make one, the first rename wins. */
function migratedTemplate(): Promise<string> {
  template ??= (async () => {
    const path = await templatePath();
    if (
      await stat(join(path, 'pglite')).then(
        () => true,
        () => false,
      )
    )
      return path;
    const building = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
    const database = await openDatabase({ dataDir: building });
    await database.close();
    await rename(building, path).catch(async () => rm(building, { recursive: true, force: true }));
    return path;
  })();
  return template;
}

/**
 * Puts an existing, migrated embedded database in `dataDir` (TWOKEY_DATA_DIR), as a twokey that has
 * run there before left it. Creating one costs `twokey serve` about 8 s of CPU on a small machine
 * (PGlite's initdb, then the migrations) against about 1.5 s to open it; tests of what a command or a
 * server does, rather than of a first start, begin from this copy. Only the database is copied: the
 * audit key beside the directory and everything else a first start makes are still made by the test.
 */
export async function existingEmbeddedDatabase(dataDir: string): Promise<void> {
  await cp(join(await migratedTemplate(), 'pglite'), pgliteDirectory(dataDir), { recursive: true });
}
