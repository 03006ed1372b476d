import type { FastifyBaseLogger } from 'fastify';

const noop = () => {};

/** Where a platform module logs when it was created without a logger (tests, tools): nowhere. */
export const silentLogger: FastifyBaseLogger = {
  level: 'silent',
  fatal: noop,
  error: noop,
  warn: noop,
  info: noop,
  debug: noop,
  trace: noop,
  silent: noop,
  child: () => silentLogger,
};
