/**
 * The package as users get it: `npm pack` of twokey and of the client package it depends on (which
 * builds each dist/ through `prepare`), installed into an empty project with plain npm and no network (`npm ci --offline` from the cache that installing
 * twokey itself filled), then used as an embedder and an agent would: `import { startTwokey } from
 * 'twokey'` in one process, `import { Twokey } from 'twokey/sdk'` in another, `npx twokey` between them,
 * and an MCP client configured as docs/mcp.md says.
 *
 * `npm pack` runs in a copy of the working tree: `prepare` empties and rebuilds dist/, and a twokey
 * running from this folder (or another test run) must never see its dist/ vanish.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startServerProcess } from '../support/processes.js';
import { copyOfTree, npm, npx, pack, root, succeed, type Packed } from './support.js';

/**
 * The consumer's lockfile: twokey and @twokey/client from their tarballs, and for twokey's other
 * dependencies exactly the versions our own lockfile pins (its entries that a user installs, at the
 * same places in node_modules; not the workspace's link). With it `npm ci --offline` needs nothing
 * but tarballs the cache already holds, and no registry metadata.
 */
async function consumerLockfile(packed: Packed, packedClient: Packed): Promise<object> {
  const ours = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8'));
  const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  const clientManifest = JSON.parse(await readFile(join(root, 'packages/client/package.json'), 'utf8'));
  const packages: Record<string, unknown> = {
    '': { name: 'consumer', dependencies: { twokey: `file:${packed.filename}`, '@twokey/client': `file:${packedClient.filename}` } },
    'node_modules/twokey': {
      version: manifest.version,
      resolved: `file:${packed.filename}`,
      integrity: packed.integrity,
      license: manifest.license,
      dependencies: manifest.dependencies,
      peerDependencies: manifest.peerDependencies,
      peerDependenciesMeta: manifest.peerDependenciesMeta,
      bin: manifest.bin,
      engines: manifest.engines,
    },
  };
  // Optional peers (devOptional: the adapters' frameworks, which we install for our tests) are never installed for a user.
  for (const [path, entry] of Object.entries(ours.packages as Record<string, { dev?: boolean; devOptional?: boolean; link?: boolean }>)) {
    if (path !== '' && !entry.dev && !entry.devOptional && !entry.link && !path.startsWith('packages/')) packages[path] = entry;
  }
  packages['node_modules/@twokey/client'] = {
    version: clientManifest.version,
    resolved: `file:${packedClient.filename}`,
    integrity: packedClient.integrity,
    license: clientManifest.license,
    peerDependencies: clientManifest.peerDependencies,
    peerDependenciesMeta: clientManifest.peerDependenciesMeta,
    engines: clientManifest.engines,
  };
  return { name: 'consumer', lockfileVersion: 3, requires: true, packages };
}

/** The live dist/ as a running twokey holds it: its inode changes when a build empties and remakes it. */
const distIdentity = (of = root) =>
  stat(join(of, 'dist')).then(
    (info) => `${info.ino}:${info.mtimeMs}`,
    () => 'absent',
  );

/** The stdio config docs/mcp.md gives MCP clients, as JSON. */
async function documentedStdioConfig(): Promise<{ command: string; args: string[]; env: Record<string, string> }> {
  const doc = await readFile(join(root, 'docs/mcp.md'), 'utf8');
  const block = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((match) => match[1] ?? '').find((json) => json.includes('"command"'));
  if (!block) throw new Error('docs/mcp.md has no stdio config');
  return (JSON.parse(block) as { mcpServers: { twokey: { command: string; args: string[]; env: Record<string, string> } } }).mcpServers.twokey;
}

/** An MCP client that starts the server as `config` says, and the tools it lists. */
async function listToolsThrough(config: { command: string; args: string[]; env: Record<string, string>; cwd?: string }): Promise<string[]> {
  const client = new Client({ name: 'desktop', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ ...config, stderr: 'pipe' }));
  try {
    return (await client.listTools()).tools.map((tool) => tool.name);
  } finally {
    await client.close();
  }
}

// Every step is a new process on a busy two-core machine (npm, node, PGlite): generous timeouts.
describe('the npm package', { timeout: 300_000 }, () => {
  let workDir: string;
  let app: string;
  let packed: Packed;
  let packedClient: Packed;
  let server: ChildProcess | undefined;
  let serverUrl: string | undefined;
  let agentKey: string | undefined;
  let liveDistBefore: string;
  let tree: string;
  const { DATABASE_URL: _noDatabase, TWOKEY_CONFIG: _noConfig, ...inherited } = process.env;

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'twokey-pack-'));
    app = join(workDir, 'app');
    await mkdir(app);
    liveDistBefore = await distIdentity();
    // `npm pack` runs `prepare`, so each tarball holds a dist/ built from the sources under test.
    tree = await copyOfTree(workDir);
    packedClient = await pack(join(tree, 'packages/client'), app);
    packed = await pack(tree, app);
    const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
    const dependencies = { twokey: `file:${packed.filename}`, '@twokey/client': `file:${packedClient.filename}` };
    await writeFile(
      join(app, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies, overrides: manifest.overrides }),
    );
    await writeFile(join(app, 'package-lock.json'), JSON.stringify(await consumerLockfile(packed, packedClient)));
    await succeed(npm, ['ci', '--offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app });
  }, 600_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await once(server, 'close');
    }
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('packs a copy of the tree: the live dist/ is left as it was', async () => {
    expect(await distIdentity()).toBe(liveDistBefore);
  });

  it('prepares without rebuilding a dist/ that is up to date (npx twokey in a clone prepares it)', async () => {
    const built = await distIdentity(tree);
    const prepared = await succeed(npm, ['run', 'prepare'], { cwd: tree });
    expect(prepared).toContain('packages/client/dist/ is up to date with its sources; not rebuilt');
    expect(prepared).toMatch(/^dist\/ is up to date with its sources; not rebuilt/m);
    expect(await distIdentity(tree)).toBe(built);
  });

  it('ships the build, the migrations and the example config, and no tests or benchmarks', () => {
    const paths = packed.files.map((file) => file.path);
    expect(paths.filter((path) => /^(test|bench|scripts)\//.test(path))).toEqual([]);
    expect(paths).toEqual(
      expect.arrayContaining([
        'bin/twokey.js',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/client/sdk.js',
        'dist/client/sdk.d.ts',
        'dist/cli/main.js.map',
        // The params schemas' meta-schema check as code, which the bundled start loads instead of compiling it.
        'dist/bundle/json-schema-2020-12-check.cjs',
        'dist/console/assets/console.css',
        'twokey.example.yaml',
        'docs/api.md',
      ]),
    );
    expect(paths.some((path) => path.startsWith('drizzle/') && path.endsWith('.sql'))).toBe(true);
    console.log(`twokey tarball: ${packed.filename}, ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${packed.entryCount} files`);
  });

  it('runs the patched database driver, bundled in, never the unpatched postgres.js the installing project holds', async () => {
    const installed = join(app, 'node_modules/twokey');
    // The project's own copy is the registry's: patches/ is ours, applied to our node_modules only.
    expect(await readFile(join(app, 'node_modules/postgres/src/connection.js'), 'utf8')).not.toContain('twokey patch');
    // The driver the package ships is the one the build made from the patched copy (the build refuses an unpatched one).
    const shipped = await readFile(join(installed, 'dist/lib/postgres-driver.js'), 'utf8');
    expect(shipped).toBe(await readFile(join(tree, 'dist/lib/postgres-driver.js'), 'utf8'));
    expect(shipped).toContain('twokey patch');
    // And no module of the package imports postgres.js from node_modules (drizzle-orm's postgres-js
    // driver, itself in node_modules, does, but runs only the client twokey hands it).
    const byValue = /\bfrom\s*["']postgres["']|import\(\s*["']postgres["']\s*\)|require\(\s*["']postgres["']\s*\)/;
    const loaders: string[] = [];
    for (const entry of await readdir(join(installed, 'dist'), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && /\.(?:c|m)?js$/.test(entry.name) && byValue.test(await readFile(join(entry.parentPath, entry.name), 'utf8')))
        loaders.push(entry.name);
    }
    expect(loaders).toEqual([]);
  });

  it('runs `npx twokey --help` from the installed package', async () => {
    const help = await succeed(npx, ['--offline', 'twokey', '--help'], { cwd: app, env: inherited });
    expect(help).toContain('Usage: twokey');
    expect(help).toMatch(/serve\s/);
    expect(help).toMatch(/proposals\s/);
  });

  it('an embedder starts the server with `twokey`; an agent on `twokey/sdk` lists operations and proposes', async () => {
    const port = await freePort();
    const env = { ...inherited, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', TWOKEY_DATA_DIR: join(workDir, 'data') };
    await writeFile(
      join(app, 'server.mjs'),
      [
        "import { loadEnv, startTwokey } from 'twokey';",
        'const running = await startTwokey({ env: loadEnv(process.env) });',
        "process.once('SIGTERM', () => void running.close().then(() => process.exit(0)));",
        "console.log('listening on ' + running.url);",
      ].join('\n'),
    );
    server = spawn(process.execPath, ['server.mjs'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let serverOutput = '';
    server.stdout?.on('data', (chunk: Buffer) => (serverOutput += chunk.toString()));
    server.stderr?.on('data', (chunk: Buffer) => (serverOutput += chunk.toString()));
    while (!serverOutput.includes('listening on')) {
      if (server.exitCode !== null) throw new Error(`server.mjs exited with ${server.exitCode}:\n${serverOutput}`);
      await once(server.stdout!, 'data');
    }

    // The CLI reaches the embedded database through the running server's admin socket.
    const created = await succeed(npx, ['--offline', 'twokey', 'agents', 'create', 'argus', '--owner', 'web:alice'], { cwd: app, env });
    const apiKey = created.trim().split('\n').at(-1)!;
    expect(apiKey).toMatch(/^tk_agent_/);
    serverUrl = `http://127.0.0.1:${port}`;
    agentKey = apiKey;

    await writeFile(
      join(app, 'agent.mjs'),
      [
        "import { Twokey, TwokeyApiError } from 'twokey/sdk';",
        "import * as client from '@twokey/client';",
        'const twokey = new Twokey({ baseUrl: process.env.TWOKEY_URL, apiKey: process.env.TWOKEY_AGENT_KEY });',
        'const operations = (await twokey.operations()).map((operation) => operation.name);',
        "const proposal = await twokey.propose({ operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } });",
        "const refused = await twokey.propose({ operation: 'upgrade_plan', params: { org: 'acme' } }).catch((error) => error instanceof TwokeyApiError ? error.code : String(error));",
        // twokey/sdk re-exports the client package: one class, so `instanceof` holds across both names.
        'const sameClient = Twokey === client.Twokey && TwokeyApiError === client.TwokeyApiError;',
        'console.log(JSON.stringify({ operations, proposal, refused, sameClient }));',
      ].join('\n'),
    );
    const answer = JSON.parse(
      await succeed(process.execPath, ['agent.mjs'], { cwd: app, env: { ...env, TWOKEY_URL: `http://127.0.0.1:${port}`, TWOKEY_AGENT_KEY: apiKey } }),
    );
    expect(answer.operations).toContain('upgrade_plan');
    expect(answer.proposal).toMatchObject({ status: 'pending', operation: 'upgrade_plan', summary: 'argus is requesting to upgrade acme to the scale plan.' });
    expect(answer.proposal.confirmToken).toMatch(/^tk_conf_/);
    expect(answer.refused).toBe('invalid_params');
    expect(answer.sameClient).toBe(true);

    const listed = await succeed(npx, ['--offline', 'twokey', 'proposals', 'list', '--status', 'pending'], { cwd: app, env });
    expect(listed).toContain(answer.proposal.id);
  });

  it('`twokey serve` from the installed package: the operator signs in to the console with a link and approves there (the example runs it at once)', async () => {
    const port = await freePort();
    // Empty is unset: the server must not take the developer's database or config from the environment.
    const env = { HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', TWOKEY_DATA_DIR: join(workDir, 'served'), DATABASE_URL: '', TWOKEY_CONFIG: '' };
    const served = await startServerProcess(env, join(app, 'node_modules/twokey/bin/twokey.js'));
    const { url, output } = served;
    const cliEnv = { ...inherited, ...env };
    try {
      const link = (await succeed(npx, ['--offline', 'twokey', 'approvers', 'link', 'operator'], { cwd: app, env: cliEnv })).trim().split('\n').at(-1)!;
      const signedIn = await fetch(`${url}/console/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: new URL(link).searchParams.get('token') ?? '' }).toString(),
      });
      expect(signedIn.status, output()).toBe(303);
      const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
      const page = await fetch(`${url}/console`, { headers: { cookie } });
      expect(page.status).toBe(200);
      const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(await page.text())?.[1] ?? '';

      const apiKey = (await succeed(npx, ['--offline', 'twokey', 'agents', 'create', 'argus'], { cwd: app, env: cliEnv })).trim().split('\n').at(-1)!;
      const proposed = await fetch(`${url}/v1/proposals`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } }),
      });
      const { id } = (await proposed.json()) as { id: string };
      const approved = await fetch(`${url}/console/proposals/${id}/approve`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf }).toString(),
      });
      expect(approved.status, output()).toBe(303);
      const view = await fetch(`${url}/v1/proposals/${id}`, { headers: { authorization: `Bearer ${apiKey}` } });
      expect(await view.json()).toMatchObject({ status: 'committed', approvals: [expect.objectContaining({ approver: 'web:operator' })] });
    } finally {
      await served.stop();
    }
  });

  it('an MCP client configured as docs/mcp.md says starts `twokey mcp` from the installed package', async () => {
    if (!serverUrl || !agentKey) throw new Error('needs the server and agent of the test before');
    const documented = await documentedStdioConfig();
    expect(documented.command).toBe('node');
    const config = {
      command: process.execPath,
      args: documented.args.map((arg) => arg.replace('/path/to/twokey', join(app, 'node_modules/twokey'))),
      env: { ...documented.env, TWOKEY_URL: serverUrl, TWOKEY_AGENT_KEY: agentKey },
    };
    expect(config.args).toEqual([join(app, 'node_modules/twokey/bin/twokey.js'), 'mcp']);
    expect(await listToolsThrough(config)).toContain('upgrade_plan');
  });

  it('`npx twokey mcp` works inside a project that depends on twokey', async () => {
    if (!serverUrl || !agentKey) throw new Error('needs the server and agent of the test before');
    const tools = await listToolsThrough({
      command: npx,
      args: ['--offline', 'twokey', 'mcp'],
      cwd: app,
      env: { TWOKEY_URL: serverUrl, TWOKEY_AGENT_KEY: agentKey },
    });
    expect(tools).toContain('upgrade_plan');
  });
});
