/**
 * The top self-time entries of a V8 CPU profile (`.cpuprofile`, as BENCH_PROFILE_DIR writes them),
 * by function and by package, to see where `twokey serve` spends its time:
 *
 *   node --import tsx bench/profile-top.ts <file.cpuprofile> [count]
 */
import { readFile } from 'node:fs/promises';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
}

/** `node_modules/<package>` (scoped too), twokey's own `src/<folder>`, or what V8 calls it. */
function owner(url: string): string {
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency?.[1]) return dependency[1];
  const own = /\/src\/([^/]+)/.exec(url);
  if (own?.[1]) return `twokey src/${own[1]}`;
  if (url.startsWith('node:')) return 'node core';
  return url ? url.replace(/^.*\//, '') : '(V8 built-ins, GC)';
}

const [file, countArgument] = process.argv.slice(2);
if (!file) throw new Error('usage: bench/profile-top.ts <file.cpuprofile> [count]');
const count = Number(countArgument ?? 20);
const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
const msPerSample = (profile.endTime - profile.startTime) / 1000 / Math.max(1, profile.samples.length);
const idleIds = new Set(profile.nodes.filter((node) => node.callFrame.functionName === '(idle)').map((node) => node.id));
// Shares are of the time the process was busy: waiting for I/O is not a cost.
const total = profile.samples.filter((id) => !idleIds.has(id)).length * msPerSample;
const byFunction = new Map<string, number>();
const byOwner = new Map<string, number>();
// Counted from the samples, not the nodes' hitCount, which V8 leaves out of some profiles.
const hits = new Map<number, number>();
for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
for (const node of profile.nodes) {
  const ms = (hits.get(node.id) ?? 0) * msPerSample;
  if (ms === 0 || idleIds.has(node.id)) continue;
  const name = `${node.callFrame.functionName || '(anonymous)'} ${owner(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + ms);
  byOwner.set(owner(node.callFrame.url), (byOwner.get(owner(node.callFrame.url)) ?? 0) + ms);
}
const top = (entries: Map<string, number>) =>
  [...entries]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, ms]) => ({ name, ms: Math.round(ms), share: `${((100 * ms) / total).toFixed(1)} %` }));
console.log(`${file}: ${Math.round(total)} ms busy`);
console.table(top(byOwner));
console.table(top(byFunction));
