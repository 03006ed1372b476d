import type * as z from 'zod';
import { TwokeyError, type ErrorDetail } from '../core/errors.js';
import type { AdminServices } from './ports.js';

/**
 * One operator command, defined once: its name, what it takes and gives (zod), what it does in a
 * process that holds the database (`run`) and how its answer reads on a terminal (`print`). The
 * admin socket, the CLI and the tests all go through this one definition.
 *
 * A command module imports only light things at the top (zod, the core's errors and pure helpers):
 * the CLI loads the whole table to talk to a running server, and must not load the server for it.
 * What `run` needs of the server side it imports inside `run`.
 */
export interface AdminCommand<Input extends z.ZodType = z.ZodType, Output extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly input: Input;
  readonly output: Output;
  run(services: AdminServices, input: z.output<Input>): Promise<z.input<Output>>;
  /** The answer as text for a terminal, without a trailing newline; empty prints nothing. */
  print(output: z.output<Output>): string;
  /** An answer that is a failure to a script (the CLI exits 1), such as a broken audit chain. */
  failed?(output: z.output<Output>): boolean;
}

/** Keeps the types of one definition (input → run → output → print) tied together. */
export const defineCommand = <Input extends z.ZodType, Output extends z.ZodType>(command: AdminCommand<Input, Output>): AdminCommand<Input, Output> => command;

function describeIssue(issue: z.core.$ZodIssue): ErrorDetail {
  const path = issue.path.map(String).join('.') || '(input)';
  return { path, message: issue.message };
}

/** The command's input, checked against its schema: a bad one is an `invalid_request` naming the field. */
export function parseCommandInput<Input extends z.ZodType>(command: AdminCommand<Input, z.ZodType>, raw: unknown): z.output<Input> {
  const parsed = command.input.safeParse(raw ?? {});
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map(describeIssue);
  // `name: …`, or the message alone when it already names its `--flag` (the CLI's words for the field).
  const message = details.map((detail) => (detail.message.startsWith('--') ? detail.message : `${detail.path}: ${detail.message}`)).join('; ');
  throw new TwokeyError('invalid_request', message);
}

/** Validates the input, runs the command, and holds its answer to the declared output. */
export async function runCommand<Input extends z.ZodType, Output extends z.ZodType>(
  services: AdminServices,
  command: AdminCommand<Input, Output>,
  raw: unknown,
): Promise<z.output<Output>> {
  const input = parseCommandInput(command, raw);
  return command.output.parse(await command.run(services, input));
}
