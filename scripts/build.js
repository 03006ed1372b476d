#!/usr/bin/env node
// `npm run build`: src/ → dist/ (JavaScript, .d.ts and source maps), plus the console's static
// assets, which tsc does not copy. dist/ is emptied first so a deleted source leaves no stale module.
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
cpSync(new URL('../src/console/assets', import.meta.url), new URL('../dist/console/assets', import.meta.url), { recursive: true });
