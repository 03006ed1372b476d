/**
 * One name per variable: every `TWOKEY_*` variable the docs, the examples and `.env.example` tell
 * people to set is one the code reads, every variable read at start is in `.env.example`, and the
 * agent key's retired names appear nowhere.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { chatPlatforms } from '../../src/platforms/index.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Every file under these paths (a file path stands for itself). */
function filesUnder(...paths: string[]): string[] {
  return paths.flatMap((path) => {
    const full = join(root, path);
    if (!statSync(full).isDirectory()) return [full];
    return readdirSync(full, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => join(entry.parentPath, entry.name));
  });
}

const VARIABLE = /\bTWOKEY_[A-Z0-9_]*[A-Z0-9]\b/g;

/** What the agent key was called before `TWOKEY_AGENT_KEY` (the name `twokey mcp` reads). */
const RETIRED = ['TWOKEY_KEY', 'TWOKEY_API_KEY'];

const documentation = filesUnder('README.md', 'docs', 'examples', '.env.example', 'twokey.example.yaml');
// The build's own switches (scripts/build.js) are read there.
const code = filesUnder('src', 'bin', 'scripts');

describe('environment variable names', () => {
  it('the docs name only variables the code reads', () => {
    const read = new Set(code.flatMap((file) => readFileSync(file, 'utf8').match(VARIABLE) ?? []));
    const unread = documentation.flatMap((file) =>
      [...new Set(readFileSync(file, 'utf8').match(VARIABLE) ?? [])].filter((name) => !read.has(name)).map((name) => `${relative(root, file)}: ${name}`),
    );
    expect(unread).toEqual([]);
    // The agent's key, under the one name the product reads.
    expect(read.has('TWOKEY_AGENT_KEY')).toBe(true);
  });

  it('.env.example documents every variable twokey reads at start', () => {
    const envSource = readFileSync(join(root, 'src/config/env.ts'), 'utf8');
    // The server's own variables, and each chat platform's (its declaration's schema).
    const declared = [
      ...[...(/export interface ServerEnv \{([\s\S]*?)\n\}/.exec(envSource)?.[1] ?? '').matchAll(/readonly ([A-Z][A-Z0-9_]*)\??:/g)].map((match) => match[1]!),
      ...chatPlatforms.flatMap((platform) => Object.keys(platform.env.schema.shape)),
    ];
    expect(declared).toContain('TEAMS_APP_ID');
    expect(declared).toContain('PORT');
    const example = readFileSync(join(root, '.env.example'), 'utf8');
    expect(declared.filter((name) => !new RegExp(`^#? ?${name}=`, 'm').test(example))).toEqual([]);
  });

  it('the retired names of the agent key appear nowhere: docs, examples, code or tests', () => {
    const everywhere = [...documentation, ...code, ...filesUnder('test', 'scripts', 'bench')].filter((file) => file !== fileURLToPath(import.meta.url));
    const found = everywhere.flatMap((file) => {
      const names = readFileSync(file, 'utf8').match(VARIABLE) ?? [];
      return names.filter((name) => RETIRED.includes(name)).map((name) => `${relative(root, file)}: ${name}`);
    });
    expect(found).toEqual([]);
  });
});
