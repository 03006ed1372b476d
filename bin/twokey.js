#!/usr/bin/env node
// The compiled twokey (`npm run build`, which `npm install` runs through `prepare`), bundled: Node
// loads a few files instead of about a thousand modules (see scripts/build.js).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/bundle/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('twokey is not built: run "npm run build" (or "npm install", which builds it) first.\n');
  process.exit(1);
}
const { main } = await import(entry.href);
await main(process.argv);
