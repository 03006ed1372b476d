#!/usr/bin/env node
// twokey runs from its TypeScript sources; tsx compiles them on load, so there is no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv);
