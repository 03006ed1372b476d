import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { loadConfigFile } from '../src/config/config-file.js';
import { loadEnv } from '../src/config/env.js';
import { startTwokey } from '../src/runtime/server.js';
import { documentPath, documentText, documentedChatEnv, sdkTypesPath, sdkTypesText } from './openapi-document.js';

/** `npm run openapi`: boots twokey (embedded database in a temporary directory, no listening) and writes docs/openapi.json and packages/client/src/sdk/api-types.ts. */
const dataDir = await mkdtemp(join(tmpdir(), 'twokey-openapi-'));
try {
  const running = await startTwokey({
    env: loadEnv({ LOG_LEVEL: 'warn', TWOKEY_DATA_DIR: dataDir, ...documentedChatEnv }),
    config: loadConfigFile(fileURLToPath(new URL('../twokey.example.yaml', import.meta.url)), {}),
    logStream: new Writable({ write: (_chunk, _encoding, done) => done() }),
    listen: false,
  });
  try {
    const response = await running.app.inject({ method: 'GET', url: '/openapi.json' });
    if (response.statusCode !== 200) throw new Error(`GET /openapi.json answered ${response.statusCode}`);
    const document: unknown = response.json();
    await writeFile(documentPath, documentText(document));
    await writeFile(sdkTypesPath, await sdkTypesText(document));
    process.stdout.write(`wrote ${fileURLToPath(documentPath)} and ${fileURLToPath(sdkTypesPath)}\n`);
  } finally {
    await running.close();
  }
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
