#!/usr/bin/env node
// `npm run build`: src/ → dist/ (JavaScript, .d.ts and source maps), plus the console's static
// assets, which tsc does not copy. dist/ is emptied first so a deleted source leaves no stale module.
//
// `--if-stale` (what `prepare` runs) builds only when a source is newer than the last build. npm
// runs `prepare` on more than `npm install`: `npx twokey` inside a clone links the clone into npx's
// cache and prepares it, which would empty the dist/ a running `npm start` is serving from.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
/** Written last: its time is when the build that produced dist/ finished. */
const stamp = join(root, 'dist', '.built');

/** The newest modification among what the build reads; directories count too (a deleted file changes its directory). */
function newestInput() {
  const inputs = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'scripts/build.js'].map((path) => join(root, path));
  let newest = 0;
  for (const input of inputs) {
    newest = Math.max(newest, statSync(input).mtimeMs);
    if (!statSync(input).isDirectory()) continue;
    for (const entry of readdirSync(input, { recursive: true, withFileTypes: true })) {
      newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}

function builtAt() {
  try {
    return statSync(stamp).mtimeMs;
  } catch {
    return 0;
  }
}

if (process.argv.includes('--if-stale') && builtAt() > newestInput()) {
  console.log('dist/ is up to date with src/; not rebuilt (npm run build rebuilds it)');
} else {
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  cpSync(join(root, 'src/console/assets'), join(root, 'dist/console/assets'), { recursive: true });
  writeFileSync(stamp, '');
}
