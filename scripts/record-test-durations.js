#!/usr/bin/env node
// `npm run test:durations`: writes test/durations.json, how long each test file took in the last
// full `npm test` on this checkout (read from vitest's own results cache), in whole seconds. The
// test sequencer (test/support/sequencer.ts) reads it where that cache is empty, as on CI's clean
// checkout. Run it after a full run when suites have grown or moved; a stale figure only costs
// a less even split of the work between the two workers, never a test.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const cacheDir = join(root, 'node_modules/.vite/vitest');
const caches = readdirSync(cacheDir).map((name) => join(cacheDir, name, 'results.json'));
const durations = {};
for (const file of caches) {
  for (const [key, result] of JSON.parse(readFileSync(file, 'utf8')).results) {
    durations[key.slice(key.indexOf(':') + 1)] = Math.max(1, Math.round(result.duration / 1000));
  }
}
const sorted = Object.fromEntries(Object.entries(durations).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync(join(root, 'test/durations.json'), `${JSON.stringify(sorted, null, 2)}\n`);
console.log(`test/durations.json: ${Object.keys(sorted).length} files`);
