/**
 * What each kind of `twokey` command loads, recorded by a resolve hook (test/support/module-log):
 * `--help` and `--version` load commander and nothing of the server; an operator command against a
 * running server loads the command table and the admin socket client; `twokey mcp` the stdio proxy;
 * `twokey serve` loads a chat platform's library only when that platform is configured.
 * Counted in modules, never in milliseconds: `npm run bench:cli` measures the time.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminSocket } from '../../src/admin/socket.js';
import { parseConfig } from '../../src/config/config-file.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { createServices } from '../../src/runtime/services.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { freePort, PROCESS_TEST_TIMEOUT_MS, runCommand, sourceBinPath, type CliResult } from '../support/processes.js';
import { existingEmbeddedDatabase } from '../support/embedded-template.js';

const recorder = fileURLToPath(new URL('../support/module-log/register.mjs', import.meta.url));
const sources = fileURLToPath(new URL('../../src/', import.meta.url));

/** The packages that make up the server: none of them belongs to a command that only asks or prints. */
const SERVER_PACKAGES = ['fastify', '@slack/bolt', 'discord.js', '@electric-sql/pglite', 'drizzle-orm', 'postgres', '@modelcontextprotocol/sdk'];

const packageOf = (url: string): string | null => {
  const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  return match?.[1] ?? null;
};

/** The src/ modules among the loaded ones, as `folder/file.ts`. */
const ownModules = (urls: readonly string[]) =>
  urls.filter((url) => url.startsWith('file:') && fileURLToPath(url).startsWith(sources)).map((url) => fileURLToPath(url).slice(sources.length));

describe('the modules each twokey command loads', { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  let dir: string;
  let logCount = 0;

  /** Runs the CLI from its sources (what the module graph is made of), with the recorder: its output and every module it loaded. */
  async function runRecorded(args: string[], env: Record<string, string>): Promise<CliResult & { modules: string[]; packages: Set<string> }> {
    const log = join(dir, `modules-${(logCount += 1)}.txt`);
    const result = await runCommand(process.execPath, ['--import', recorder, sourceBinPath, ...args], {
      cwd: dir,
      env: { ...process.env, TWOKEY_CONFIG: '', DATABASE_URL: '', ...env, TWOKEY_MODULE_LOG: log },
    });
    const modules = [...new Set((await readFile(log, 'utf8')).split('\n').filter(Boolean))];
    return { ...result, modules, packages: new Set(modules.map(packageOf).filter((name) => name !== null)) };
  }

  /** `twokey serve` from its sources with the recorder, until its first 200 on /readyz: the packages it loaded to get there. */
  async function serveRecorded(env: Record<string, string>): Promise<Set<string>> {
    const log = join(dir, `modules-${(logCount += 1)}.txt`);
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', recorder, sourceBinPath, 'serve'], {
      cwd: dir,
      env: {
        ...process.env,
        TWOKEY_CONFIG: '',
        DATABASE_URL: '',
        SLACK_BOT_TOKEN: '',
        SLACK_APP_TOKEN: '',
        SLACK_SIGNING_SECRET: '',
        DISCORD_BOT_TOKEN: '',
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'warn',
        TWOKEY_DATA_DIR: join(dir, 'serve-data'),
        ...env,
        TWOKEY_MODULE_LOG: log,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let errors = '';
    child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    try {
      // Bounded by the test's timeout; a start that fails ends the loop with its output.
      for (;;) {
        if (child.exitCode !== null) throw new Error(`twokey serve exited with ${child.exitCode}:\n${errors}`);
        const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (response) => response.ok,
          () => false,
        );
        if (ready) break;
        await new Promise((done) => setTimeout(done, 50));
      }
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'close');
      }
    }
    const modules = (await readFile(log, 'utf8')).split('\n').filter(Boolean);
    return new Set(modules.map(packageOf).filter((name) => name !== null));
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'twokey-modules-'));
    // The servers below start on an existing database: what they load is the subject, not a first start.
    await Promise.all(['serve-data', 'rule-data'].map((name) => existingEmbeddedDatabase(join(dir, name))));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('--help and --version load commander and no module of twokey beyond the command list', async () => {
    for (const flag of ['--help', '--version']) {
      const run = await runRecorded([flag], {});
      expect(run.code, run.stderr).toBe(0);
      // The recorder sees what it should: the launcher's own modules and commander.
      expect(run.packages).toContain('commander');
      for (const name of SERVER_PACKAGES) expect(run.packages, `${flag} loaded ${name}`).not.toContain(name);
      expect(ownModules(run.modules).sort()).toEqual(['cli/main.ts', 'cli/program.ts']);
    }
  });

  it('twokey mcp loads the stdio proxy and its MCP SDK, nothing of the server', async () => {
    // Nothing listens there: it loads, tries, and exits 1 naming the URL.
    const run = await runRecorded(['mcp'], { TWOKEY_URL: `http://127.0.0.1:${await freePort()}`, TWOKEY_AGENT_KEY: 'tk_agent_unused' });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('twokey mcp: cannot use');
    expect(run.packages).toContain('@modelcontextprotocol/sdk');
    for (const name of SERVER_PACKAGES.filter((name) => name !== '@modelcontextprotocol/sdk')) expect(run.packages, `mcp loaded ${name}`).not.toContain(name);
    expect(ownModules(run.modules).sort()).toEqual(['cli/main.ts', 'cli/mcp.ts', 'cli/program.ts', 'mcp/stdio-proxy.ts']);
  });

  it('twokey serve with no chat configured loads neither Bolt nor discord.js; with Slack, Bolt alone', async () => {
    const plain = await serveRecorded({});
    // The recorder saw the server: its HTTP framework and its embedded database.
    expect(plain).toContain('fastify');
    expect(plain).toContain('@electric-sql/pglite');
    expect(plain, 'serve without chat loaded @slack/bolt').not.toContain('@slack/bolt');
    expect(plain, 'serve without chat loaded discord.js').not.toContain('discord.js');
    // Loaded at first use: CEL by the first policy condition, undici by the first callback or
    // executor request, openid-client by the first console sign-in.
    for (const name of ['@bufbuild/cel', 'undici', 'openid-client']) expect(plain, `serve loaded ${name} before its first use`).not.toContain(name);

    // Slack over HTTP: nothing is asked of Slack at start (its API URL leads nowhere all the same).
    const slack = await serveRecorded({
      SLACK_BOT_TOKEN: 'xoxb-unused',
      SLACK_SIGNING_SECRET: 'unused-signing-secret',
      SLACK_API_URL: `http://127.0.0.1:${await freePort()}/api/`,
    });
    expect(slack).toContain('@slack/bolt');
    expect(slack, 'serve with Slack only loaded discord.js').not.toContain('discord.js');
  });

  it('twokey serve loads CEL when an operation has a policy rule, and starts with the rule compiled', async () => {
    const config = join(dir, 'with-rule.yaml');
    const rule = { when: 'params.amount_cents < 500', decide: 'approve', reason: 'small refund' };
    await writeFile(config, configYaml([refundOperation({ approvers: ['web:alice'], policy: [rule] })]));
    const loaded = await serveRecorded({ TWOKEY_CONFIG: config, TWOKEY_DATA_DIR: join(dir, 'rule-data') });
    expect(loaded).toContain('@bufbuild/cel');
  });

  describe('beside a server that holds the embedded database', () => {
    let dataDir: string;
    let database: Database;
    let socket: Awaited<ReturnType<typeof startAdminSocket>>;

    beforeAll(async () => {
      dataDir = join(dir, 'data');
      await existingEmbeddedDatabase(dataDir);
      // What `twokey serve` does for the CLI: hold the data directory (its lock) and answer on the admin socket.
      database = await openDatabase({ dataDir });
      const config = parseConfig(configYaml([refundOperation({ approvers: ['web:alice'] })]), {}, join(dir, 'twokey.config.yaml'));
      socket = await startAdminSocket(createServices({ database, config }), dataDir);
    }, PROCESS_TEST_TIMEOUT_MS);
    afterAll(async () => {
      await new Promise((done) => socket.close(done));
      await database.close();
    });

    it('an operator command asks over the socket, loading the command table and the socket client, not the server', async () => {
      const created = await runRecorded(['agents', 'create', 'argus'], { TWOKEY_DATA_DIR: dataDir });
      expect(created.code, created.stderr).toBe(0);
      expect(created.stdout).toContain('Agent "argus" created');
      const listed = await runRecorded(['agents', 'list'], { TWOKEY_DATA_DIR: dataDir });
      expect(listed.stdout).toContain('argus');
      for (const run of [created, listed]) {
        for (const name of SERVER_PACKAGES) expect(run.packages, `an admin command loaded ${name}`).not.toContain(name);
        const own = ownModules(run.modules);
        expect(own).toContain('admin/client.ts');
        expect(own).toContain('admin/commands.ts');
        // A chat platform's declaration (`<name>/platform.ts`) may load: it holds the identity forms
        // `--as` is checked against, and imports nothing but lib and core (npm run depcheck).
        for (const module of own)
          expect(module, `an admin command loaded ${module}`).not.toMatch(
            /^(runtime|http|db\/database|admin\/socket|outbox)\b|^(slack|discord)\/(?!platform\.ts$)/,
          );
      }
    });

    it('a bad input is refused by the command schema on the server, naming the field, and changes nothing', async () => {
      const refused = await runRecorded(['proposals', 'list', '--status', 'zombie'], { TWOKEY_DATA_DIR: dataDir });
      expect(refused.code).toBe(1);
      expect(refused.stderr.trim()).toBe('twokey: --status must be one of pending, approved, executing, committed, rejected, expired, cancelled');
      const unnamed = await runRecorded(['agents', 'create', ''], { TWOKEY_DATA_DIR: dataDir });
      expect(unnamed.code).toBe(1);
      expect(unnamed.stderr.trim()).toBe('twokey: name: missing name');
      const listed = await runRecorded(['agents', 'list'], { TWOKEY_DATA_DIR: dataDir });
      expect(listed.stdout.trim().split('\n')).toHaveLength(2);
    });
  });
});
