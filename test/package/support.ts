import { cp, readdir, stat, symlink } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand, type CliResult } from '../support/processes.js';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
export const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';

/** What a command printed, and how it ended. */
export type Run = CliResult;

export function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Run> {
  return runCommand(command, args, { cwd: options.cwd, env: options.env ?? process.env });
}

export async function succeed(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  const result = await run(command, args, options);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.code}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

export interface PackedFile {
  path: string;
}
export interface Packed {
  filename: string;
  size: number;
  unpackedSize: number;
  entryCount: number;
  integrity: string;
  files: PackedFile[];
}

/** `npm pack` of the package in `dir` (which runs its `prepare`, so builds it) into `destination`. */
export async function pack(dir: string, destination: string): Promise<Packed> {
  const output = await succeed(npm, ['pack', '--json', '--pack-destination', destination], { cwd: dir });
  return (JSON.parse(output.slice(output.indexOf('['))) as Packed[])[0]!;
}

/** What never goes into the copy: installed things, local state, git's own files. */
const NOT_COPIED = new Set(['node_modules', '.git', 'data', 'data.audit-key.pem', 'data.audit-checkpoints', 'coverage', 'test-results']);

/**
 * The working tree as it is (uncommitted changes included) in `into`, with the live node_modules
 * linked in (only read: the build's TypeScript, the types), so `prepare` builds the copy's dist/
 * folders, never the live ones a running twokey (or another test run) reads. The dist/ folders are
 * copied with every file's times kept: `prepare` then rebuilds only when a source is newer than the
 * build (a local tree with uncommitted changes), as it would in a clone, and a fresh build (CI's
 * install made one) is packed without compiling the project twice more.
 */
export async function copyOfTree(into: string): Promise<string> {
  const copy = join(into, 'tree');
  const copied = (source: string) => {
    const [first = '', workspace, inWorkspace = ''] = relative(root, source).split(sep);
    return !NOT_COPIED.has(first) && !(first === 'packages' && workspace && NOT_COPIED.has(inWorkspace));
  };
  await cp(root, copy, { recursive: true, filter: copied, preserveTimestamps: true });
  await symlink(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir');
  return copy;
}

/** The bytes of every file under `dir` (what an install puts on disk, before block rounding), symbolic links not followed. */
export async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return total;
}
