/**
 * The README's quick start, run as a user would run it, so the README cannot drift from the product.
 * Every fenced `sh` block of the "Quick start" section runs in order, in an empty directory (so the
 * embedded database lands in ./data and the example config is used) against a fresh server. A
 * comment `# → …` after a command is its expected output (`…` stands for anything); every command
 * must succeed. What a user types is substituted only where the test cannot do it the user's way:
 * `npm install && npm start` / `npx twokey` run the same CLI from the sources (the package test covers
 * the built one), port 8080 becomes a free port, and `prp_…` in a command becomes the id proposed.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { binPath, freePort } from '../support/processes.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Step {
  command: string;
  /** The `# →` comment after it, continuation lines joined. */
  expected?: string;
}

/** The commands of one fenced block, with `\` continuations joined, and each one's expected output. */
function stepsOf(block: string): { steps: Step[]; comments: string[] } {
  const steps: Step[] = [];
  const comments: string[] = [];
  let inExpected = false;
  let pending = '';
  for (const line of block.split('\n')) {
    if (pending) {
      pending += ` ${line.trim().replace(/\\$/, '').trim()}`;
      if (!line.trimEnd().endsWith('\\')) {
        steps.push({ command: pending });
        pending = '';
      }
      continue;
    }
    if (line.startsWith('# → ')) {
      const step = steps.at(-1);
      if (!step) throw new Error(`expected output before any command: ${line}`);
      step.expected = line.slice(4).trim();
      inExpected = true;
    } else if (inExpected && line.startsWith('#    ')) {
      steps.at(-1)!.expected += line.slice(5).trim();
    } else if (line.startsWith('#')) {
      inExpected = false;
      comments.push(line.replace(/^#\s*/, ''));
    } else if (line.trim()) {
      inExpected = false;
      if (line.trimEnd().endsWith('\\')) pending = line.trimEnd().replace(/\\$/, '').trim();
      else steps.push({ command: line.trim() });
    }
  }
  return { steps, comments };
}

/** `…` matches anything; the rest literally. */
const pattern = (text: string, anchored: boolean) =>
  new RegExp(
    `${anchored ? '^' : ''}${text
      .split('…')
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[\\s\\S]*?')}`,
    'm',
  );

function run(command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('README quick start', { timeout: 600_000 }, () => {
  let blocks: string[];
  let workDir: string;
  let port: number;
  let env: NodeJS.ProcessEnv;
  const twokey = `node ${JSON.stringify(binPath)}`;
  const substitute = (text: string) => text.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`).replaceAll('npx twokey', twokey);

  beforeAll(async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const section = /^## Quick start.*$([\s\S]*?)^## /m.exec(readme)?.[1] ?? '';
    blocks = [...section.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```/gm)].map((match) => match[1]!);
    workDir = await mkdtemp(join(tmpdir(), 'twokey-readme-'));
    port = await freePort();
    const { DATABASE_URL: _database, TWOKEY_CONFIG: _config, TWOKEY_DATA_DIR: _data, ...inherited } = process.env;
    env = { ...inherited, PORT: String(port), HOST: '127.0.0.1' };
  });
  afterAll(() => rm(workDir, { recursive: true, force: true }));

  it('has the two blocks: start, then the walk-through', () => {
    expect(blocks).toHaveLength(2);
    expect(stepsOf(blocks[0]!).steps.map((step) => step.command)).toEqual(['npm install && npm start']);
  });

  it('runs every command of the quick start and prints what the README shows', async () => {
    // Block 1: the server, from the sources; what it prints must be what the README's comments show.
    const start = stepsOf(blocks[0]!);
    // Under a pseudo-terminal (util-linux `script`), as a person starting it: the sign-in link is
    // printed only when stderr is a terminal, never into captured output.
    const server = spawn('script', ['-qefc', `exec ${twokey} serve`, '/dev/null'], { cwd: workDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let printed = '';
    server.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    server.stderr.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    try {
      await vi.waitFor(
        () => {
          if (server.exitCode !== null) throw new Error(`twokey serve exited:\n${printed}`);
          for (const line of start.comments) expect(printed).toMatch(pattern(substitute(line), false));
        },
        { timeout: 240_000, interval: 200 },
      );

      // Block 2: each command in order, with the variables earlier commands set.
      let proposalId = '';
      for (const step of stepsOf(blocks[1]!).steps) {
        let command = substitute(step.command);
        if (proposalId) command = command.replaceAll('prp_…', proposalId);
        const assignment = /^([A-Z_]+)=(.*)$/.exec(command);
        const result = await run(assignment ? `${assignment[1]}=${assignment[2]}; printf %s "$${assignment[1]}"` : command, workDir, env);
        expect({ command: step.command, code: result.code, stderr: result.stderr }).toEqual({ command: step.command, code: 0, stderr: '' });
        if (assignment) env[assignment[1]!] = result.stdout;
        if (step.expected) expect(result.stdout).toMatch(pattern(step.expected, true));
        proposalId ||= /"id":"(prp_[^"]+)"/.exec(result.stdout)?.[1] ?? '';
      }
      expect(env.KEY).toMatch(/^tk_agent_/);
      expect(proposalId).toMatch(/^prp_/);
    } finally {
      server.kill('SIGTERM');
      if (server.exitCode === null) await once(server, 'close');
    }
  });
});
