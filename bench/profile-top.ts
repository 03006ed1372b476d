/**
 * Where `twokey serve` spends its time, from a V8 CPU profile (`.cpuprofile`, as BENCH_PROFILE_DIR
 * writes them): the top entries by package and by function, counting each sample where it was
 * taken (self time), then by package counting every package a sample passes through (inclusive):
 *
 *   node --import tsx bench/profile-top.ts <file.cpuprofile> [count] [pattern]
 *
 * With a pattern (a regular expression), a fifth table: the functions whose name or source matches
 * it, counting every sample that passes through them (what a call of each costs, with its callees).
 *
 * A bundle built with source maps (TWOKEY_BUILD_SOURCEMAP=1 node scripts/build.js) is read back to
 * its sources: twokey's own modules by `src/<folder>`, bundled packages by name.
 */
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

const root = fileURLToPath(new URL('..', import.meta.url));

/** `node_modules/<package>` (scoped too), twokey's own `src/<folder>`, or what V8 calls it. */
function ownerOf(url: string): string {
  // drizzle-orm's own source maps point one level too high, so its sources land in node_modules/src.
  if (url.includes('node_modules/src/')) return 'drizzle-orm';
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency?.[1]) return dependency[1];
  const own = url.startsWith(`file://${root}src/`) || url.startsWith(`${root}src/`) ? /\/src\/([^/]+)/.exec(url) : null;
  if (own?.[1]) return `twokey src/${own[1].replace(/\.ts$/, '')}`;
  if (url.startsWith('node:')) return 'node core';
  return url ? url.replace(/^.*\//, '') : '(V8 built-ins, GC)';
}

const maps = new Map<string, SourceMap | null>();
/** The source map beside a bundle file, if the build wrote one. */
function mapOf(url: string): SourceMap | null {
  if (!maps.has(url)) {
    let map: SourceMap | null = null;
    try {
      if (url.startsWith('file:')) map = new SourceMap(JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, 'utf8')));
    } catch {
      map = null;
    }
    maps.set(url, map);
  }
  return maps.get(url) ?? null;
}

/** A frame's owner and name, read back through the bundle's source map where there is one. */
function frameOf({ functionName, url, lineNumber, columnNumber }: ProfileNode['callFrame']): { owner: string; name: string } {
  const entry = mapOf(url)?.findEntry(lineNumber, columnNumber);
  // A map's sources are relative to the map (the file beside it): resolved, they name their package.
  const original = entry && 'originalSource' in entry ? new URL(entry.originalSource, url).href : null;
  const at =
    original && entry && 'originalLine' in entry
      ? `${original.replace(/^.*?(node_modules\/|\/src\/)/, '$1')}:${entry.originalLine + 1}`
      : `${ownerOf(url)}:${lineNumber + 1}`;
  return { owner: ownerOf(original ?? url), name: `${functionName || '(anonymous)'} ${at}` };
}

const [file, countArgument, pattern] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/profile-top.ts <file.cpuprofile> [count]');
const count = Number(countArgument ?? 20);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const msPerSample = (profile.endTime - profile.startTime) / 1000 / Math.max(1, profile.samples.length);
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parents = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
const frames = new Map(profile.nodes.map((node) => [node.id, frameOf(node.callFrame)]));
const idle = (id: number) => nodes.get(id)?.callFrame.functionName === '(idle)';

// Counted from the samples, not the nodes' hitCount, which V8 leaves out of some profiles.
const byFunction = new Map<string, number>();
const byOwner = new Map<string, number>();
const throughOwner = new Map<string, number>();
const throughFunction = new Map<string, number>();
const wanted = pattern ? new RegExp(pattern) : null;
const add = (entries: Map<string, number>, key: string) => entries.set(key, (entries.get(key) ?? 0) + msPerSample);
let busySamples = 0;
for (const id of profile.samples) {
  // Shares are of the time the process was busy: waiting for I/O is not a cost.
  if (idle(id)) continue;
  busySamples += 1;
  const frame = frames.get(id)!;
  add(byFunction, frame.name);
  add(byOwner, frame.owner);
  const passed = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
    const owner = frames.get(at)?.owner;
    if (owner && owner !== '(V8 built-ins, GC)') passed.add(owner);
  }
  for (const owner of passed) add(throughOwner, owner);
  if (wanted) {
    const through = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
      const name = frames.get(at)?.name;
      if (name && wanted.test(name)) through.add(name);
    }
    for (const name of through) add(throughFunction, name);
  }
}
const total = busySamples * msPerSample;
const top = (entries: Map<string, number>) =>
  [...entries]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, ms]) => ({ name, ms: Math.round(ms), share: `${((100 * ms) / total).toFixed(1)} %` }));
console.log(`${file}: ${Math.round(total)} ms busy`);
console.log('\nself time, by package');
console.table(top(byOwner));
console.log('\nself time, by function');
console.table(top(byFunction));
console.log('\nevery package a sample passes through (inclusive)');
console.table(top(throughOwner));
if (wanted) {
  console.log(`\nfunctions matching ${String(wanted)}, with their callees (inclusive)`);
  console.table(top(throughFunction));
}
