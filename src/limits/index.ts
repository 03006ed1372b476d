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
  /** Failed authentications per client address per window, before every request from it is refused. */
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

/**
 * Counts failed authentications per client address in fixed windows (in memory: per process). Past
 * the limit, every request from that address is refused before its key is even looked at, so keys
 * cannot be guessed at speed.
 */
export function createFailedAuthLimiter(options: { max: number; windowMs: number; clock: Clock }) {
  const failures = new Map<string, { count: number; windowStart: number }>();
  const current = (address: string, now: number) => {
    const entry = failures.get(address);
    return entry && now - entry.windowStart < options.windowMs ? entry : null;
  };
  return {
    check(request: Pick<FastifyRequest, 'ip'>): void {
      const entry = current(request.ip, options.clock().getTime());
      if (entry && entry.count >= options.max) {
        throw new RefusalError(
          'rate_limited',
          'failed_auth',
          `too many failed authentications from this address (limit ${options.max} a minute); try again later`,
        );
      }
    },
    recordFailure(request: Pick<FastifyRequest, 'ip'>): void {
      const now = options.clock().getTime();
      const entry = current(request.ip, now);
      if (entry) entry.count += 1;
      else {
        // Stale windows go when their address fails again; this bounds the map by recent offenders.
        if (failures.size > 10_000) failures.clear();
        failures.set(request.ip, { count: 1, windowStart: now });
      }
    },
  };
}

export type FailedAuthLimiter = ReturnType<typeof createFailedAuthLimiter>;
