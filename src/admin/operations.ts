import type { AdminServices } from './ports.js';
import { runCommand } from './command.js';
import { adminCommand } from './commands.js';

/**
 * Runs an operator command by name in a process that holds the database: the admin socket's
 * server side, the CLI without a running server, and tests. Input and output are plain JSON,
 * checked against the command's schemas.
 */
export async function runAdminOperation(services: AdminServices, name: string, args: unknown): Promise<unknown> {
  return runCommand(services, adminCommand(name), args);
}
