#!/usr/bin/env node
// `npm run build`: the client workspace (packages/client/src → packages/client/dist), then the server
// (src/ → dist/), each as JavaScript, .d.ts and source maps; the server's build reads the client's
// declarations, so the client goes first. The server also gets the console's static assets, which tsc
// does not copy, and the `twokey` command bundled (dist/bundle/, see bundleCli). Each dist/ is emptied
// first so a deleted source leaves no stale module.
// `--client` builds the client alone (what the client package's own `prepare` and `npm pack` run).
//
// `--if-stale` (what `prepare` runs) builds only when a source is newer than the last build. npm
// runs `prepare` on more than `npm install`: `npx twokey` inside a clone links the clone into npx's
// cache and prepares it, which would empty the dist/ a running `npm start` is serving from.
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CLIENT_INPUTS, SERVER_INPUTS, isFresh } from './build-freshness.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

const client = {
  name: 'packages/client/dist/',
  dir: join(root, 'packages/client'),
  inputs: CLIENT_INPUTS,
  async afterCompile() {},
};
const server = {
  name: 'dist/',
  dir: root,
  inputs: SERVER_INPUTS,
  async afterCompile() {
    cpSync(join(root, 'src/console/assets'), join(root, 'dist/console/assets'), { recursive: true });
    await bundleCli();
    await writeMetaSchemaCheck();
  },
};

/**
 * Packages the CLI bundle leaves to Node: PGlite finds its WebAssembly and data files beside its own
 * modules; the others load only when a feature first needs them (a chat platform, tracing, MCP
 * upstreams, sign-in, passkeys, policy conditions, callbacks, email), each from its own place in
 * node_modules exactly as without a bundle. @fastify/cookie is CommonJS that loads `cookie` with
 * `import()`; bundled, that import gives only the module's default export, and every Set-Cookie
 * (the console's sign-in) threw. Left to Node, it gets the named exports as without a bundle.
 */
const unbundled = [
  '@fastify/cookie',
  '@electric-sql/pglite',
  '@bufbuild/cel',
  '@bufbuild/cel-spec',
  '@bufbuild/protobuf',
  '@modelcontextprotocol/sdk',
  '@opentelemetry/sdk-node',
  '@simplewebauthn/server',
  '@slack/bolt',
  'discord.js',
  'jose',
  'nodemailer',
  'openid-client',
  'undici',
];

/**
 * The `twokey` command as a few files (dist/bundle/, what bin/twokey.js runs): dist/cli/main.js and
 * everything it imports, split where it imports lazily. Node 20 loads about a thousand modules one by
 * one before `twokey serve` answers; bundled, a start takes about a quarter less CPU. dist/bundle/ sits two
 * levels under the package like dist/cli/, so the paths the modules find by their own location
 * (package.json, drizzle/, the example configuration) are the same; the console's assets are copied
 * beside it. The library entry points (`twokey`, `twokey/sdk`, ...) stay dist/'s single modules.
 */
async function bundleCli() {
  const { build: bundle } = await import('esbuild');
  cpSync(join(root, 'src/console/assets'), join(root, 'dist/assets'), { recursive: true });
  await bundle({
    entryPoints: { main: join(root, 'dist/cli/main.js') },
    outdir: join(root, 'dist/bundle'),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: unbundled,
    // CommonJS dependencies call require(), which an ES module does not have.
    banner: { js: "import { createRequire as createBundleRequire } from 'node:module'; const require = createBundleRequire(import.meta.url);" },
    logLevel: 'warning',
    // TWOKEY_BUILD_SOURCEMAP=1: maps beside the bundle, so a CPU profile's positions (BENCH_PROFILE_DIR)
    // can be traced back to src/ files and lines. Off by default: the maps would double what ships.
    ...(process.env.TWOKEY_BUILD_SOURCEMAP ? { sourcemap: 'linked' } : {}),
  });
}

/**
 * The params schemas' check against JSON Schema's draft 2020-12 meta-schemas, as code (see
 * metaSchemaCheckCode in src/config/params-schema.ts): compiling it took about 45 ms of every start.
 * Written beside the module that loads it, dist/config/, and beside the bundle's.
 */
async function writeMetaSchemaCheck() {
  const { metaSchemaCheckCode } = await import(pathToFileURL(join(root, 'dist/config/params-schema.js')).href);
  const { file, code } = metaSchemaCheckCode();
  for (const dir of ['dist/config', 'dist/bundle']) writeFileSync(join(root, dir, file), code);
}

async function build(target) {
  if (process.argv.includes('--if-stale') && isFresh(root, target.dir, target.inputs)) {
    console.log(`${target.name} is up to date with its sources; not rebuilt (npm run build rebuilds it)`);
    return;
  }
  rmSync(join(target.dir, 'dist'), { recursive: true, force: true });
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: target.dir, stdio: 'inherit' });
  await target.afterCompile();
  writeFileSync(join(target.dir, 'dist', '.built'), '');
}

await build(client);
if (!process.argv.includes('--client')) await build(server);
