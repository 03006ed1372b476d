import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain-JS script (run by node before any install check), without type declarations
import { DEV_ONLY_EXCEPTIONS, engineConflicts } from '../../scripts/check-engines.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const lockfile = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
const clientManifest = JSON.parse(readFileSync(join(root, 'packages/client/package.json'), 'utf8'));

function sourceFiles(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => /\.(ts|js)$/.test(file))
    .map((file) => join(root, folder, file));
}

/** The packages a file imports by name (`pino`, `@slack/bolt`), not relative paths or node builtins. */
function importedPackages(files: string[]): Set<string> {
  const names = new Set<string>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(/^\s*(?:import|export)\b[^;]*?\sfrom\s+'([^']+)'|^\s*import\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm)) {
      const specifier = match[1] ?? match[2] ?? match[3];
      if (!specifier || specifier.startsWith('.') || specifier.startsWith('node:') || builtinModules.includes(specifier)) continue;
      const parts = specifier.split('/');
      names.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
    }
  }
  names.delete('twokey');
  return names;
}

describe('package.json', () => {
  it('every locked package runs on every Node version our engines field allows (development-only exceptions named)', () => {
    const conflicts = engineConflicts(lockfile, manifest.engines.node) as { path: string; dev: boolean }[];
    expect(conflicts.filter((conflict) => !conflict.dev)).toEqual([]);
    expect(conflicts.filter((conflict) => !(conflict.path in DEV_ONLY_EXCEPTIONS))).toEqual([]);
  });

  it('the engines check catches a locked package that wants a newer Node (cookie@2 wanted ≥ 22)', () => {
    const narrower = {
      packages: {
        '': {},
        'node_modules/cookie': { version: '2.0.2', engines: { node: '>=22' } },
        'node_modules/ok': { version: '1.0.0', engines: { node: '>=18' } },
      },
    };
    expect(engineConflicts(narrower, manifest.engines.node)).toEqual([{ path: 'node_modules/cookie', version: '2.0.2', node: '>=22', dev: false }]);
  });

  it('declares every package the server imports as a dependency, and what tests and scripts import at least as a devDependency', () => {
    // The framework adapters' frameworks are optional peers: the application that uses an adapter has its framework.
    const dependencies = [...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies ?? {})];
    const all = [...dependencies, ...Object.keys(manifest.devDependencies)];
    const byServer = [...importedPackages(sourceFiles('src'))];
    expect(byServer.filter((name) => !dependencies.includes(name))).toEqual([]);
    const byTooling = [...importedPackages([...sourceFiles('test'), ...sourceFiles('bench'), ...sourceFiles('scripts'), ...sourceFiles('bin')])];
    expect(byTooling.filter((name) => !all.includes(name))).toEqual([]);
  });

  it('the client package depends on nothing: its sources import only node builtins and the optional peers its adapters adapt', () => {
    expect(clientManifest.dependencies).toBeUndefined();
    const peers = Object.keys(clientManifest.peerDependencies);
    expect(peers.every((name) => clientManifest.peerDependenciesMeta[name]?.optional === true)).toBe(true);
    expect([...importedPackages(sourceFiles('packages/client/src'))].sort()).toEqual([...peers].sort());
    // Nor does it reach into the server by a relative path (the adapters once took outcomeText from src/core).
    const clientSources = join(root, 'packages/client/src');
    const escaping = sourceFiles('packages/client/src').flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/from\s+'(\.[^']*)'/g)]
        .map((match) => resolve(dirname(file), match[1]!))
        .filter((target) => !target.startsWith(clientSources + sep)),
    );
    expect(escaping).toEqual([]);
    // The server ships the client's version it was built against, from this repository.
    expect(manifest.dependencies['@twokey/client']).toBe(clientManifest.version);
  });

  it('needs no TypeScript loader at run time: tsx is for development only', () => {
    expect(manifest.dependencies.tsx).toBeUndefined();
    expect(readFileSync(join(root, 'bin/twokey.js'), 'utf8')).not.toContain('tsx');
  });
});
