import { LogLevel, type Logger as BoltLogger } from '@slack/bolt';
import type { LogFn } from 'pino';

/** The part of twokey's pino logger the Slack module writes to. */
export interface SlackLog {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}

/** Keeps a URL's origin only: a path may be a response_url, which is a bearer credential. */
export function redactUrls(text: string): string {
  return text.replace(/\b(https?|wss?):\/\/[^\s"'<>)]+/g, (url) => {
    try {
      return `${new URL(url).origin}/[path hidden]`;
    } catch {
      return '[url hidden]';
    }
  });
}

function describe(parts: unknown[]): string {
  return parts
    .map((part) => {
      if (typeof part === 'string') return part;
      if (part instanceof Error) return `${part.name}: ${part.message}`;
      if (typeof part === 'number' || typeof part === 'boolean') return String(part);
      // Objects are not serialised: Bolt passes request bodies and client options around.
      return '';
    })
    .filter(Boolean)
    .join(' ');
}

/**
 * Bolt, the Web API client and the Socket Mode client log through this. Their debug output prints
 * whole payloads (response_url included) and request bodies, so debug is dropped here whatever
 * LOG_LEVEL says; the rest goes to twokey's logger with URLs cut to their origin.
 */
export function boltLogger(target: () => SlackLog): BoltLogger {
  let level: LogLevel = LogLevel.INFO;
  let name = 'slack';
  const write = (method: 'info' | 'warn' | 'error', parts: unknown[]) => {
    const message = redactUrls(describe(parts));
    if (message) target()[method]({ component: name }, message);
  };
  return {
    debug: () => {},
    info: (...parts: unknown[]) => write('info', parts),
    warn: (...parts: unknown[]) => write('warn', parts),
    error: (...parts: unknown[]) => write('error', parts),
    setLevel: (next: LogLevel) => {
      level = next;
    },
    getLevel: () => level,
    setName: (next: string) => {
      name = next;
    },
  };
}
