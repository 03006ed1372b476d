import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Files that set process-wide state through a library's global API (OpenTelemetry), and the Teams
 * files: the step-up file failed twice in a full run with shared modules (its cards were never
 * posted) and never alone or beside the files that ran before it; isolated until that is understood.
 */
const ISOLATED = ['test/tracing/**/*.test.ts', 'test/teams/**/*.test.ts'];

export default defineConfig({
  // The client workspace from its sources, as tsconfig.json's `paths` give them to tsc and tsx (the
  // tests' child processes): the tests never read a built, possibly stale packages/client/dist/.
  resolve: {
    alias: [
      { find: /^@twokey\/client$/, replacement: fileURLToPath(new URL('packages/client/src/sdk/index.ts', import.meta.url)) },
      {
        find: /^@twokey\/client\/(ai-sdk|openai-agents|langgraph)$/,
        replacement: fileURLToPath(new URL('packages/client/src/adapters/$1.ts', import.meta.url)),
      },
    ],
  },
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/no-internet.ts', 'test/support/random.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // PGlite is CPU-bound and the machine has two cores.
    maxWorkers: 2,
    projects: [
      // A worker keeps the modules it loaded for the next file: importing the server again for each
      // of ~170 files cost more CPU than the tests themselves. Nothing in src/ keeps module-level state
      // a test could leak (metrics registries, stores and caches belong to each started twokey), and
      // no test mocks a module or edits process.env.
      { extends: true, test: { name: 'shared modules', isolate: false, include: ['test/**/*.test.ts'], exclude: ISOLATED } },
      // Each of these files gets a fresh module graph (see ISOLATED).
      { extends: true, test: { name: 'isolated', isolate: true, include: ISOLATED } },
    ],
  },
});
