/* global module */
/**
 * The direction of src/, checked by `npm run depcheck` (dependency-cruiser).
 *
 *   lib, policy  ←  core  ←  platforms  ←  config  ←  feature folders  ←  db  ←  runtime  ←  cli
 *
 * - `lib` holds general helpers and imports nothing from src/; `policy` compiles CEL rules on lib.
 * - `core` holds the rules and the ports storage and transports implement; it knows only lib and
 *   policy.
 * - `platforms` is the list of chat platforms, and only that: it imports each platform's
 *   declaration (`src/<name>/platform.ts`: identities, config parts, variables, stored clicks) and
 *   builds from them what config and the rest iterate (the identity grammar, the job catalogue).
 *   A declaration imports only lib and core (rule `platform-declaration-is-light`), so the list
 *   sits below config although its files live in the platforms' folders; and no folder but
 *   `platforms` and the platform's own imports a declaration (rule `declarations-through-registry`),
 *   so every platform is reached alike, by name. A platform's module (`index.ts`, with its library)
 *   is loaded by `runtime` alone, with `import()`, when configured. See src/chat/README.md.
 * - `config` turns the environment and the operations file into plain data the core's types
 *   describe; it knows no executor, transport or store.
 * - Feature folders (transports, executors, the outbox, …) build on the core and config, and on each
 *   other only as `ALLOWED` below says, which is itself a direction (no folder cycle).
 * - `db` implements the storage ports each consumer declares in its own `ports.ts`: it may import a
 *   feature folder's `ports.ts` and nothing else of it; no feature folder imports `db`.
 * - `runtime` wires everything (the composition root); `cli` and `src/index.ts` start it.
 *
 * Type-only imports count (`tsPreCompilationDeps`): a cycle through types is still a cycle.
 */

/** For each folder of src/, the other folders it may import. Anything not listed is refused. */
const ALLOWED = {
  lib: [],
  policy: ['lib'],
  core: ['lib', 'policy'],
  platforms: ['lib', 'core'], // and the declaration files (rule `layer-platforms`, below)
  config: ['lib', 'policy', 'core', 'platforms'],
  tracing: ['lib', 'core'],
  limits: ['lib', 'core'],
  idempotency: ['lib', 'core'],
  executors: ['lib', 'core', 'config', 'tracing'],
  audit: ['lib', 'core', 'config'],
  passkeys: ['lib', 'core'],
  'http-kit': ['lib', 'core', 'config', 'limits', 'tracing'],
  outbox: ['lib', 'core', 'platforms', 'config', 'executors', 'tracing'],
  chat: ['lib', 'core', 'config', 'outbox'],
  http: ['lib', 'core', 'config', 'limits', 'tracing', 'idempotency', 'http-kit'],
  agp: ['lib', 'core', 'config', 'limits', 'tracing', 'idempotency', 'http-kit'],
  mcp: ['lib', 'core', 'platforms', 'config', 'limits', 'tracing', 'idempotency', 'executors', 'http-kit'],
  console: ['lib', 'core', 'platforms', 'config', 'chat', 'http-kit', 'passkeys'],
  slack: ['lib', 'core', 'config', 'chat', 'outbox', 'http-kit'],
  discord: ['lib', 'core', 'config', 'chat', 'outbox', 'idempotency', 'http-kit'],
  teams: ['lib', 'core', 'config', 'chat', 'outbox', 'http-kit'],
  // The confirm page wears the console's layout and security headers.
  email: ['lib', 'core', 'config', 'chat', 'console'],
  admin: ['lib', 'core', 'policy', 'platforms', 'config', 'audit', 'outbox', 'console', 'passkeys'],
  client: [],
  db: ['lib', 'core'], // and the ports.ts of every folder above (rule `db-implements-ports`)
  runtime: null, // every folder but cli
  cli: null, // every folder
};

const FOLDERS = Object.keys(ALLOWED);

// The table itself must be a direction: a folder cycle allowed here would pass every rule below.
(function assertAcyclic() {
  const state = new Map(); // folder → 'visiting' | 'done'
  const visit = (folder, path) => {
    if (state.get(folder) === 'done') return;
    if (state.get(folder) === 'visiting') throw new Error(`.dependency-cruiser.cjs: ALLOWED has a cycle: ${[...path, folder].join(' → ')}`);
    state.set(folder, 'visiting');
    for (const next of ALLOWED[folder] ?? []) visit(next, [...path, folder]);
    state.set(folder, 'done');
  };
  for (const folder of FOLDERS) visit(folder, []);
})();
/** The folders whose storage ports src/db implements. */
const PORT_OWNERS = FOLDERS.filter((folder) => !['lib', 'policy', 'core', 'db', 'runtime', 'cli', 'client'].includes(folder));

const layerRules = Object.entries(ALLOWED)
  .filter(([, allowed]) => allowed !== null)
  .map(([folder, allowed]) => {
    const others = FOLDERS.filter((other) => other !== folder && !allowed.includes(other));
    const dbExtra = folder === 'db' ? PORT_OWNERS : [];
    if (folder === 'platforms') {
      return {
        name: 'layer-platforms',
        comment: "src/platforms may import only lib, core and the platforms' declarations (src/<name>/platform.ts)",
        severity: 'error',
        from: { path: '^src/platforms/' },
        to: { path: `^src/(?:(?:${others.join('|')})/|index\\.ts$)`, pathNot: '^src/[^/]+/platform\\.ts$' },
      };
    }
    return {
      name: `layer-${folder}`,
      comment: `src/${folder} may import only ${allowed.length ? allowed.join(', ') : 'nothing of src/'}${dbExtra.length ? ' (and ports.ts files)' : ''}`,
      severity: 'error',
      from: { path: `^src/${folder}/` },
      to: {
        path: `^src/(?:(?:${others.join('|')})/|index\\.ts$)`,
        ...(dbExtra.length ? { pathNot: `^src/(?:${dbExtra.join('|')})/ports\\.ts$` } : {}),
      },
    };
  });

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No file imports itself through others: a cycle means two files are one, or a type sits in the wrong one.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'platform-declaration-is-light',
      comment: "A chat platform's declaration is read by every process (config, the CLI): it may import lib and core only, never its library.",
      severity: 'error',
      from: { path: '^src/[^/]+/platform\\.ts$' },
      to: { path: '^src/', pathNot: '^src/(?:lib|core)/' },
    },
    {
      name: 'declarations-through-registry',
      comment: 'Code reaches a chat platform through src/platforms (the one list), never by importing its declaration; the platform itself may.',
      severity: 'error',
      from: { path: '^src/([^/]+)/', pathNot: '^src/platforms/' },
      to: { path: '^src/[^/]+/platform\\.ts$', pathNot: '^src/$1/' },
    },
    {
      name: 'nothing-imports-runtime',
      comment: 'src/runtime is the composition root: only cli and src/index.ts start it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(?:runtime|cli)/|^src/index\\.ts$' },
      to: { path: '^src/runtime/' },
    },
    {
      name: 'nothing-imports-cli',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'driver-through-one-module',
      comment:
        "postgres.js's code is imported by src/lib/postgres-driver.ts alone, which the build replaces with the patched driver bundled in: an import elsewhere would load the installing project's unpatched copy. Types may come from 'postgres' anywhere.",
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/lib/postgres-driver\\.ts$' },
      to: { path: '(?:^|/)node_modules/postgres/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'src-stands-alone',
      comment: 'The server never imports tests, benchmarks or scripts.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(?:test|bench|scripts)/' },
    },
    {
      name: 'minimal-servers-stand-alone',
      comment:
        "The benchmarks' minimal servers are the floor twokey is measured against: they load fastify, the driver and undici, never twokey, the tests' fakes or the harness (whose imports would run in their process).",
      severity: 'error',
      from: { path: '^bench/support/minimal-' },
      to: { path: '^(?:src|test|scripts)/|^bench/', pathNot: '^bench/support/minimal-server\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^packages/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
