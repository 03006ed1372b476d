import type { FastifyRequest } from 'fastify';
import { RefusalError } from '../core/errors.js';
import type { Clock } from '../core/model.js';

/**
 * Per-agent and per-address limits, so one agent (or one stranger guessing keys) cannot exhaust
 * what every agent shares: open connections, approvers' attention, the idempotency table.
 */

export interface ResourceLimits {
  /** Open `GET /v1/proposals/:id?wait=` per agent. */
  longPollsPerAgent: number;
  /** Pending (undecided, unexpired) proposals per agent, from /v1 and /agp alike. */
  pendingPerAgent: number;
  /** Refused authentications per client address, and per failing key prefix, per window; past it, refusals answer 429. */
  failedAuthPerAddress: number;
  failedAuthWindowMs: number;
}

export const DEFAULT_LIMITS: ResourceLimits = {
  longPollsPerAgent: 20,
  pendingPerAgent: 100,
  failedAuthPerAddress: 20,
  failedAuthWindowMs: 60_000,
};

/** Counts the long-polls an agent holds open; `enter` is null when the agent is at its limit. */
export function createLongPollLimiter(max: number) {
  const open = new Map<string, number>();
  return {
    enter(agentId: string): (() => void) | null {
      const count = open.get(agentId) ?? 0;
      if (count >= max) return null;
      open.set(agentId, count + 1);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        const remaining = (open.get(agentId) ?? 1) - 1;
        if (remaining <= 0) open.delete(agentId);
        else open.set(agentId, remaining);
      };
    },
    refusal: () =>
      new RefusalError(
        'rate_limited',
        'long_polls',
        `this agent already holds ${max} open long-polls (the limit); wait for one to answer, or poll without ?wait`,
      ),
  };
}

export type LongPollLimiter = ReturnType<typeof createLongPollLimiter>;

/** The part of a refused key counted on its own: guesses at one key, or one stale key retried, add up whatever the address. */
export const failingKeyPrefix = (token: string): string => token.slice(0, 13);

/** How many addresses, and how many key prefixes, are counted at once. */
const MAX_COUNTED = 10_000;

/**
 * Fixed-window counts under keys, at most MAX_COUNTED of them. A full table first drops the windows
 * that ended; if every one is live, a new key goes uncounted rather than evicting a live count:
 * otherwise a stranger could wipe their own address's count by sending many different keys.
 */
function createWindowCounts(windowMs: number) {
  const windows = new Map<string, { count: number; windowStart: number }>();
  // A sweep walks the whole table: at most one a second, so a flood of new keys costs no more.
  let lastSweep = -Infinity;
  return (key: string, now: number): { count: number; endsAt: number } | null => {
    let entry = windows.get(key);
    if (!entry || now - entry.windowStart >= windowMs) {
      if (!entry && windows.size >= MAX_COUNTED) {
        if (now - lastSweep < 1_000) return null;
        lastSweep = now;
        for (const [stale, window] of windows) if (now - window.windowStart >= windowMs) windows.delete(stale);
        if (windows.size >= MAX_COUNTED) return null;
      }
      entry = { count: 0, windowStart: now };
      windows.set(key, entry);
    }
    entry.count += 1;
    return { count: entry.count, endsAt: entry.windowStart + windowMs };
  };
}

/**
 * Counts refused credentials per client address and per failing key prefix, in fixed windows (in
 * memory: per process). It only ever sees refusals: a valid key is checked first and served, so
 * nobody is locked out by someone else's failures on a shared address (a proxy, a NAT). Past the
 * limit, a refusal is answered 429 with `Retry-After` instead of 401.
 *
 * What slows a guesser is the key itself: 32 random bytes cannot be found by guessing at any rate
 * an address can send. What this limiter adds is that a guesser, or an agent stuck on a revoked
 * key, is told to back off with a 429 that proxies and clients act on (every refusal is counted on
 * /metrics: `twokey_auth_refusals_total`, `twokey_rate_limit_refusals_total`), without touching the neighbours behind the same address.
 */
export function createFailedAuthLimiter(options: { max: number; windowMs: number; clock: Clock }) {
  const byAddress = createWindowCounts(options.windowMs);
  const byKeyPrefix = createWindowCounts(options.windowMs);
  return {
    /** Counts a refused credential (`token` null when none was sent); a 429 to answer instead of the refusal once over a limit. */
    recordFailure(request: Pick<FastifyRequest, 'ip' | 'url'>, token: string | null): { error: RefusalError; retryAfterSeconds: number } | null {
      const now = options.clock().getTime();
      const counts = [byAddress(request.ip, now), token === null ? null : byKeyPrefix(failingKeyPrefix(token), now)];
      const over = counts.filter((entry): entry is { count: number; endsAt: number } => entry !== null && entry.count > options.max);
      if (over.length === 0) return null;
      const retryAfterSeconds = Math.max(1, Math.ceil((Math.max(...over.map((entry) => entry.endsAt)) - now) / 1000));
      return {
        retryAfterSeconds,
        error: new RefusalError(
          'rate_limited',
          'failed_auth',
          `too many failed authentications from this address or with this key (limit ${options.max} a minute); check the API key, and try again in ${retryAfterSeconds} s`,
        ),
      };
    },
  };
}

export type FailedAuthLimiter = ReturnType<typeof createFailedAuthLimiter>;
