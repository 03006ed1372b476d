#!/usr/bin/env node
// Every package in package-lock.json must run on every Node version our `engines` allows: a locked
// package that declares a narrower range (cookie@2 wants Node ≥ 22) would break, or warn on, an
// install we promise works. `node scripts/check-engines.js` lists the offenders and exits 1.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import semver from 'semver';

/**
 * Development-only packages we knowingly lock although they declare a newer Node, with the reason.
 * Nothing that an installed twokey loads may be here.
 */
export const DEV_ONLY_EXCEPTIONS = {
  'node_modules/openai':
    '@openai/agents 0.20 (devDependency, for testing the optional twokey/openai-agents adapter) needs openai 7, which declares Node >= 22; the adapter tests run on Node 20',
};

/** The lockfile entries whose `engines.node` does not cover all of `ours`. */
export function engineConflicts(lockfile, ours) {
  const conflicts = [];
  for (const [path, entry] of Object.entries(lockfile.packages ?? {})) {
    if (path === '') continue;
    const theirs = entry.engines?.node;
    if (typeof theirs !== 'string') continue;
    if (!semver.validRange(theirs) || !semver.subset(ours, theirs)) {
      // `devOptional`: a devDependency that is also an optional peer of the client workspace (the
      // adapters' frameworks and what they bring); npm never installs optional peers for a user.
      conflicts.push({ path, version: entry.version, node: theirs, dev: entry.dev === true || entry.devOptional === true });
    }
  }
  return conflicts;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const lockfile = JSON.parse(readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8'));
  const ours = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node;
  const conflicts = engineConflicts(lockfile, ours).filter((conflict) => !(conflict.dev && conflict.path in DEV_ONLY_EXCEPTIONS));
  for (const { path, version, node } of conflicts) console.log(`${path}@${version} wants node ${node}; we promise ${ours}`);
  if (conflicts.length > 0) process.exit(1);
  console.log(`every locked package runs on node ${ours} (but the development-only exceptions named in this script)`);
}
