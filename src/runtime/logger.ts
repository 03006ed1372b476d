import type { LoggerOptions } from 'pino';
import { TwokeyError } from '../core/errors.js';
import { scrubSecrets } from '../lib/secrets.js';

/** Whether a log call's first argument carries (in `err`, or `err`'s causes) the refusal of a write for want of disk space. */
function isStorageRefusal(first: unknown): boolean {
  let cause = typeof first === 'object' && first !== null ? (first as { err?: unknown }).err : undefined;
  for (let depth = 0; depth < 5 && typeof cause === 'object' && cause !== null; depth += 1) {
    if (cause instanceof TwokeyError) return cause.code === 'insufficient_storage';
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

const WARN = 40;

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'req.headers["x-confirmation-token"]',
        'req.headers["x-slack-signature"]',
        'req.headers["x-signature-ed25519"]',
        '*.confirmToken',
        '*.confirmationToken',
        '*.apiKey',
        '*.token',
        '*.secret',
      ],
      censor: '[REDACTED]',
    },
    hooks: {
      streamWrite: scrubSecrets,
      logMethod(args, method, logLevel) {
        // A disk short of space is logged once per change by the storage guard; every background loop
        // (outbox, audit chain, sweeper) would otherwise repeat it on each turn until space is freed.
        if (logLevel >= WARN && isStorageRefusal(args[0])) return this.debug(...args);
        return method.apply(this, args);
      },
    },
  };
}
