import type * as z from 'zod';
import { callAdminSocket } from '../admin/client.js';
import { adminCommands, type AdminCommandName, type AdminCommands } from '../admin/commands.js';
import type { Env } from '../config/env.js';
import { isDataDirLocked } from '../db/data-dir-lock.js';

/**
 * The CLI's operator commands: run where the data lives, printed with the command's own `print`.
 * Loads the command table and the admin socket client; the database and the services only when
 * no server holds the data (see in-process.ts).
 */

export type Output<Name extends AdminCommandName> = z.output<AdminCommands[Name]['output']>;

/**
 * Runs one operator command where the data lives: through the admin socket of the server that
 * holds the embedded database, or here, on PostgreSQL or an idle embedded database.
 */
export async function execute<Name extends AdminCommandName>(env: Env, name: Name, input: unknown): Promise<Output<Name>> {
  if (!env.DATABASE_URL && (await isDataDirLocked(env.TWOKEY_DATA_DIR))) {
    // The server checked the input and held its answer to the command's output schema.
    return (await callAdminSocket(env.TWOKEY_DATA_DIR, name, input)) as Output<Name>;
  }
  const { runHere } = await import('./in-process.js');
  return (await runHere(env, name, input)) as Output<Name>;
}

/** Prints an answer as the command says; `json` prints it as JSON, one line per row. */
export function printAnswer<Name extends AdminCommandName>(name: Name, output: Output<Name>, options: { json?: boolean } = {}): void {
  if (options.json) {
    for (const row of Array.isArray(output) ? output : [output]) console.log(JSON.stringify(row));
    return;
  }
  const command = adminCommands[name] as unknown as { print(output: Output<Name>): string };
  const text = command.print(output);
  if (text !== '') console.log(text);
}

export async function runAndPrint<Name extends AdminCommandName>(
  env: Env,
  name: Name,
  input: unknown,
  options: { json?: boolean } = {},
): Promise<Output<Name>> {
  const output = await execute(env, name, input);
  printAnswer(name, output, options);
  const command = adminCommands[name] as unknown as { failed?(output: Output<Name>): boolean };
  // An answer that is a failure (a run that failed again, a broken chain) is exit 1 for scripts.
  if (command.failed?.(output)) process.exitCode = 1;
  return output;
}
