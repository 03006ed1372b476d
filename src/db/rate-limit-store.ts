import { lt, sql } from 'drizzle-orm';
import type { Db } from './database.js';
import { rateLimitWindows } from './schema.js';
import { rowsOf } from './rows.js';

type Callback = (error: Error | null, result?: { current: number; ttl: number }) => void;

interface Lease {
  windowStart: number;
  /** Tokens this replica holds for the window. */
  granted: number;
  used: number;
  /** Set once the fleet has no tokens left for the window: no more round trips until it ends. */
  exhausted: boolean;
  leasing: Promise<void> | null;
}

export interface SharedRateLimitOptions {
  db: Db;
  now?: () => number;
  /** Tokens leased per round trip, as a fraction of `max` (at least one). */
  leaseFraction?: number;
}

/**
 * A store for @fastify/rate-limit whose counters every replica shares, so N replicas allow the
 * documented rate and not N times it. Windows are fixed and aligned across replicas. A replica
 * leases a block of tokens per key and window in one statement and spends them locally, so most
 * requests cost no database round trip. The fleet never allows more than `max` per window; tokens
 * leased by a replica that gets no more traffic that window go unused (at most one block each).
 * One counter per key across routes: the limit is per API key.
 */
export function createSharedRateLimitStore(options: SharedRateLimitOptions) {
  const now = options.now ?? Date.now;
  const fraction = options.leaseFraction ?? 0.05;
  const leases = new Map<string, Lease>();

  async function lease(key: string, state: Lease, max: number): Promise<void> {
    const block = Math.max(1, Math.ceil(max * fraction));
    const result = await options.db.execute(sql`
      insert into rate_limit_windows (key, window_start, taken) values (${key}, ${state.windowStart}, ${block})
      on conflict (key, window_start) do update set taken = rate_limit_windows.taken + excluded.taken
      returning taken`);
    const [row] = rowsOf<{ taken: number }>(result);
    const before = Number(row?.taken ?? 0) - block;
    const grantedNow = Math.max(0, Math.min(block, max - before));
    state.granted += grantedNow;
    if (grantedNow < block) state.exhausted = true;
  }

  async function take(key: string, timeWindow: number, max: number): Promise<{ current: number; ttl: number }> {
    const time = now();
    const windowStart = Math.floor(time / timeWindow) * timeWindow;
    const ttl = windowStart + timeWindow - time;
    let state = leases.get(key);
    if (!state || state.windowStart !== windowStart) {
      state = { windowStart, granted: 0, used: 0, exhausted: false, leasing: null };
      leases.set(key, state);
    }
    for (;;) {
      if (state.used < state.granted) {
        state.used += 1;
        return { current: state.used, ttl };
      }
      if (state.exhausted) return { current: max + 1, ttl };
      // One lease in flight per key: concurrent requests wait for it instead of each taking a block.
      state.leasing ??= lease(key, state, max).finally(() => {
        state.leasing = null;
      });
      await state.leasing;
    }
  }

  class SharedStore {
    incr(key: string, callback: Callback, timeWindow: number, max: number): void {
      take(key, timeWindow, max).then(
        (result) => callback(null, result),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    }
    child(): SharedStore {
      return this;
    }
  }

  return {
    Store: SharedStore,
    /** Forgets windows that ended long ago (the sweeper calls it). */
    async prune(before: number): Promise<void> {
      await options.db.delete(rateLimitWindows).where(lt(rateLimitWindows.windowStart, before));
      for (const [key, state] of leases) if (state.windowStart < before) leases.delete(key);
    },
  };
}

export type SharedRateLimitStore = ReturnType<typeof createSharedRateLimitStore>;
