#!/usr/bin/env node
// twokey straight from its TypeScript sources (tsx compiles them on load): for development, the tests
// and the benchmarks, so they never run a stale dist/. Users run bin/twokey.js, the compiled build.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv);
