#!/usr/bin/env node
// `npm run build`: the client workspace (packages/client/src → packages/client/dist), then the server
// (src/ → dist/), each as JavaScript, .d.ts and source maps; the server's build reads the client's
// declarations, so the client goes first. The server also gets the console's static assets, which tsc
// does not copy, the patched database driver bundled into dist/lib/postgres-driver.js (bundleDriver),
// and the `twokey` command bundled (dist/bundle/, see bundleCli). Each dist/ is emptied
// first so a deleted source leaves no stale module.
// `--client` builds the client alone (what the client package's own `prepare` and `npm pack` run).
//
// `--if-stale` (what `prepare` runs) builds only when a source is newer than the last build. npm
// runs `prepare` on more than `npm install`: `npx twokey` inside a clone links the clone into npx's
// cache and prepares it, which would empty the dist/ a running `npm start` is serving from.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, posix, resolve } from 'node:path';
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
    await bundleDriver();
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

/** Where the driver module is in dist/, and how the CLI bundle's chunks (in dist/bundle/) import it. */
const DRIVER_MODULE = 'dist/lib/postgres-driver.js';
const DRIVER_FROM_BUNDLE = posix.relative('dist/bundle', DRIVER_MODULE);

/**
 * The files of postgres.js's ES module build that patches/ changes: what the driver module must be
 * built from, each carrying the patch's `twokey patch` marks.
 */
function patchedDriverFiles() {
  const patches = readdirSync(join(root, 'patches')).filter((name) => /^postgres\+.*\.patch$/.test(name));
  const files = patches.flatMap((name) =>
    [...readFileSync(join(root, 'patches', name), 'utf8').matchAll(/^diff --git a\/(node_modules\/postgres\/src\/\S+)/gm)].map((match) => match[1]),
  );
  if (files.length === 0) throw new Error("patches/ holds no change to postgres.js's src/: the driver module would ship unpatched");
  return files;
}

/**
 * dist/lib/postgres-driver.js, as tsc compiled it from src/lib/postgres-driver.ts, replaced by itself
 * with postgres.js bundled in: built from this project's node_modules, which `npm install` patched,
 * so an installed twokey runs the patched driver and never the registry's copy the installing
 * project holds. A node_modules that was not patched (`npm install --ignore-scripts`) fails the
 * build rather than ship the faults the patch fixes.
 */
async function bundleDriver() {
  const { build: bundle } = await import('esbuild');
  const outfile = join(root, DRIVER_MODULE);
  const { outputFiles, metafile } = await bundle({
    entryPoints: [outfile],
    absWorkingDir: root,
    outfile,
    write: false,
    metafile: true,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'warning',
  });
  // By real path: node_modules may be a link (the package tests build a copy of the tree that links ours).
  const builtFrom = new Set(Object.keys(metafile.inputs).map((input) => resolve(root, input)));
  for (const file of patchedDriverFiles()) {
    if (!builtFrom.has(realpathSync(join(root, file))) || !readFileSync(join(root, file), 'utf8').includes('twokey patch')) {
      throw new Error(
        `${file} is not patched, or not what the driver was built from: run \`npm install\` (its postinstall applies patches/), then build again`,
      );
    }
  }
  writeFileSync(outfile, outputFiles[0].contents);
  // tsc's map describes the one-line module this file replaced.
  rmSync(`${outfile}.map`, { force: true });
}

/**
 * The CLI bundle imports the driver module from dist/lib/ instead of copying it into a chunk: a stack
 * from the driver's own code then names that file, which is how src/lib/driver-errors.ts knows it.
 * drizzle's postgres-js driver imports postgres.js too (it runs it only for a URL, never for the
 * client twokey hands it): that import gets the same module, not a second copy to load.
 */
const driverStaysOutside = {
  name: 'driver-stays-outside',
  setup(build) {
    build.onResolve({ filter: /(?:[\\/]postgres-driver\.js|^postgres)$/ }, () => ({ path: DRIVER_FROM_BUNDLE, external: true }));
  },
};

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
    plugins: [driverStaysOutside],
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
