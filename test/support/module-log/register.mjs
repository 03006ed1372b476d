// `node --import ./register.mjs …`: records every module the process loads into the file named by
// TWOKEY_MODULE_LOG, one file: URL a line. ES modules are recorded as they resolve (hooks.mjs, on the
// loader thread); CommonJS ones, which Node 20 loads without those hooks, from require's cache at exit.
// What a command loads, not how long it takes: the tests assert on it, the CLI bench counts it.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

const file = process.env.TWOKEY_MODULE_LOG;
if (file) {
  register('./hooks.mjs', import.meta.url, { data: { file } });
  const cache = createRequire(import.meta.url).cache;
  process.on('exit', () => {
    const loaded = Object.keys(cache).map((path) => pathToFileURL(path).href);
    if (loaded.length > 0) appendFileSync(file, `${loaded.join('\n')}\n`);
  });
}
