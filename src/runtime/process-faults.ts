import type { Logger } from 'pino';
import { isDriverError } from '../lib/driver-errors.js';

/** The part of `process` the policy listens on (tests pass an emitter of their own). */
export interface FaultSource {
  on(event: 'uncaughtException', listener: (error: Error) => void): unknown;
  on(event: 'unhandledRejection', listener: (reason: unknown) => void): unknown;
  off(event: 'uncaughtException', listener: (error: Error) => void): unknown;
  off(event: 'unhandledRejection', listener: (reason: unknown) => void): unknown;
}

export interface ProcessFaultOptions {
  logger: Logger;
  source?: FaultSource;
  /** Ends the process; `process.exit` by default. */
  exit?: (code: number) => void;
}

/**
 * The last resort for an error nothing caught. One of the database driver's is logged and
 * survived: the pool reconnects by itself, every state change was one transaction, and the
 * outbox, the claims and the sweeper pick up whatever was cut short. Anything else leaves the
 * process in a state nobody reasoned about, so it is logged and the process exits with 1, for a
 * supervisor to start a fresh one (what twokey acknowledged is in the database, not in memory).
 * The logger redacts and scrubs secrets like every other line. Returns the function that removes
 * the listeners.
 */
export function handleProcessFaults(options: ProcessFaultOptions): () => void {
  const source = options.source ?? process;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let exiting = false;

  function onFault(kind: string, error: unknown): void {
    if (isDriverError(error)) {
      options.logger.error({ err: error }, `database driver ${kind}; twokey carries on, the driver reconnects`);
      return;
    }
    options.logger.fatal({ err: error }, `${kind}; exiting so that a supervisor starts twokey again`);
    if (exiting) return;
    exiting = true;
    // The fatal line first: the log is written asynchronously.
    options.logger.flush(() => exit(1));
  }

  const onException = (error: Error) => onFault('uncaught exception', error);
  const onRejection = (reason: unknown) => onFault('unhandled rejection', reason);
  source.on('uncaughtException', onException);
  source.on('unhandledRejection', onRejection);
  return () => {
    source.off('uncaughtException', onException);
    source.off('unhandledRejection', onRejection);
  };
}
