import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Env } from '../config/env.js';
import { buildProgram, type Context } from './program.js';

/**
 * `twokey`: the entry point. It loads commander and the list of commands, nothing else; each command
 * imports what it needs when it runs (see program.ts), so `--help` and `--version` start as fast as
 * Node does, and an admin command against a running server never loads the server.
 */

/** This package's version (`twokey --version`, the traces' `service.version`); dist/cli and src/cli both sit two levels down. */
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * Reads `.env` from the working directory when there is one, as `npm start` users expect from
 * `.env.example`. A variable already set in the environment keeps its value: the file only fills gaps.
 */
async function loadDotEnv(path = '.env'): Promise<void> {
  try {
    process.loadEnvFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    const [{ ConfigError }, { systemErrorText }] = await Promise.all([import('../config/errors.js'), import('../lib/system-errors.js')]);
    // Node reports a directory named .env as an invalid argument.
    const reason = code === 'EISDIR' || code === 'ERR_INVALID_ARG_TYPE' ? 'it is not a file' : systemErrorText(code ?? 'unreadable');
    throw new ConfigError(`cannot read ${resolve(path)}: ${reason}`, []);
  }
}

export async function main(argv: string[]): Promise<void> {
  let loaded: Env | undefined;
  const context: Context = {
    version: VERSION,
    // Read (and checked) on first use: `--help` never needs it.
    env: async () => (loaded ??= (await import('../config/env.js')).loadEnv()),
  };
  try {
    await loadDotEnv();
    await buildProgram(context).parseAsync(argv);
  } catch (error) {
    const { explainFailure } = await import('./start-errors.js');
    const failure = explainFailure(error, loaded);
    console.error(`twokey: ${failure.message}`);
    if (failure.unexpected && (loaded?.LOG_LEVEL === 'debug' || loaded?.LOG_LEVEL === 'trace')) console.error(error);
    process.exit(failure.exitCode);
  }
}
