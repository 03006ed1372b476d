import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/support/sequencer.js';

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
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    setupFiles: ['test/support/no-internet.ts', 'test/support/random.ts', 'test/support/real-timers.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Three workers on two cores: the suite waits on the processes and servers it starts for about a
    // fifth of its time, which a third file fills (on a two-core machine: 665 s against 711 with two).
    maxWorkers: 3,
    // A worker keeps the modules it loaded from one test file to the next instead of loading
    // twokey, fastify, drizzle and the rest again for each of ~190 files: loading was a quarter of
    // the suite's CPU on a two-core machine. What src/ keeps at module level is caches of what it
    // loads or computes (undici, CEL environments, PGlite's WASM), as one serving process shares
    // them; each test opens its own database, app and servers, and setup files guard what they patch.
    isolate: false,
    sequence: { sequencer: LongestFirstSequencer },
  },
});
