// Whether a build is up to date with its sources: `prepare` (scripts/build.js --if-stale) skips a
// fresh build, and the tests run the `twokey` command from a fresh build rather than through tsx
// (test/support/processes.ts). One rule for both, so neither trusts a build the other would redo.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The newest modification among `inputs` (paths under `root`); directories count too (a deleted file changes its directory). */
export function newestInput(root, inputs) {
  let newest = 0;
  for (const input of inputs.map((path) => join(root, path))) {
    const stats = statSync(input);
    newest = Math.max(newest, stats.mtimeMs);
    if (!stats.isDirectory()) continue;
    for (const entry of readdirSync(input, { recursive: true, withFileTypes: true })) {
      newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}

/** When the build that produced `dir`/dist finished: its stamp is written last; 0 when there is none. */
export function builtAt(dir) {
  try {
    return statSync(join(dir, 'dist', '.built')).mtimeMs;
  } catch {
    return 0;
  }
}

const SHARED_INPUTS = ['tsconfig.json', 'scripts/build.js', 'scripts/build-freshness.js'];

/** What each build reads, relative to the repository's root. */
export const CLIENT_INPUTS = [...SHARED_INPUTS, 'packages/client/src', 'packages/client/tsconfig.build.json', 'packages/client/package.json'];
/**
 * The client's sources count: the server's declarations and re-exports follow them. patches/ too:
 * the build bundles the patched database driver into dist/ (bundleDriver in build.js).
 */
export const SERVER_INPUTS = [...SHARED_INPUTS, 'src', 'tsconfig.build.json', 'package.json', 'packages/client/src', 'patches'];

/** True when `dir`'s dist/ was built after every one of `inputs` last changed. */
export function isFresh(root, dir, inputs) {
  return builtAt(dir) > newestInput(root, inputs);
}
