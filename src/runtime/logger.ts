import type { LoggerOptions } from 'pino';
import { scrubSecrets } from '../lib/secrets.js';

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
    hooks: { streamWrite: scrubSecrets },
  };
}
