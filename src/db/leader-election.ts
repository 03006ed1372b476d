import postgres from '../lib/postgres-driver.js';
import { withDeadline } from '../lib/timeouts.js';
import { CONNECT_TIMEOUT_SECONDS, reconnectDelaySeconds } from './database.js';

/** What the election logs; pino's and fastify's loggers both fit. */
export interface ElectionLog {
  info(details: object, message?: string): void;
  warn(details: object, message?: string): void;
}

export interface LeaderElectionOptions {
  /** PostgreSQL URL; undefined on the embedded database, where the one process always leads. */
  databaseUrl: string | undefined;
  /** The advisory lock key; every replica of the fleet uses the same one for the same work. */
  key: number;
  name: string;
  log: () => ElectionLog;
  /** How often a standby tries the lock, and the leader checks it still holds it. */
  retryMs?: number;
  /** Starts the singleton work. If it throws, leadership is given back so another replica can try. */
  onElected?(): Promise<void> | void;
  /** Stops the singleton work: the lock is lost (or being given back). */
  onDeposed?(): Promise<void> | void;
}

/** Bounds a lock query: a connection that hangs must not keep a stale leader in charge. */
function within<T>(ms: number, query: () => Promise<T>): Promise<T> {
  return withDeadline(ms, query, () => new Error(`no answer within ${ms} ms`));
}

const QUERY_TIMEOUT_MS = 5_000;

/**
 * When to try again. A database that is down is tried again at the normal pace, so the singleton
 * work resumes within one period of its return (backing off to a minute kept it stopped that long
 * after an outage). Only work that fails to start once elected backs off, up to a minute.
 */
export function nextElectionDelayMs(retryMs: number, workFailures: number): number {
  return workFailures > 0 ? Math.min(retryMs * 2 ** Math.min(workFailures, 6), 60_000) : retryMs;
}

/**
 * Elects one replica for work that must run once per fleet (the sweeper, the Discord gateway
 * connection): the holder of a PostgreSQL session-level advisory lock. The lock lives on a client of
 * its own with one connection that is never recycled — a pooled connection could be handed to other
 * work, and a reserved one does not survive its session being killed. When the holder dies its
 * session ends, PostgreSQL frees the lock, and a standby takes it on its next try.
 */
export function createLeaderElection(options: LeaderElectionOptions) {
  const retryMs = options.retryMs ?? 2_000;
  let connection: postgres.Sql | null = null;
  /** The lock session's backend pid while leading: postgres.js reconnects silently, and a new pid means the lock is gone. */
  let leaderPid: number | null = null;
  let leading = false;
  let timer: NodeJS.Timeout | null = null;
  let ticking: Promise<void> | null = null;
  let stopped = true;
  /** The singleton work failed to start this many times in a row (not the database: that is retried at the normal pace). */
  let workFailures = 0;

  async function resign(): Promise<void> {
    const wasLeading = leading;
    leading = false;
    leaderPid = null;
    if (wasLeading) await options.onDeposed?.();
    // unlock_all: a session lock taken twice needs two unlocks; this connection holds nothing else.
    const lock = connection;
    if (lock) await within(QUERY_TIMEOUT_MS, () => lock`select pg_advisory_unlock_all()`).catch(() => undefined);
  }

  async function lead(): Promise<void> {
    leading = true;
    options.log().info({ singleton: options.name }, 'this replica now runs the singleton');
    try {
      await options.onElected?.();
      workFailures = 0;
    } catch (error) {
      workFailures += 1;
      // Let another replica try: the failure may be this one's network.
      await resign();
      throw error;
    }
  }

  async function tick(): Promise<void> {
    const lock = connection;
    if (!lock) {
      if (!leading) await lead();
      return;
    }
    if (leaderPid === null) {
      const [row] = await within(
        QUERY_TIMEOUT_MS,
        () => lock<Array<{ locked: boolean; pid: number }>>`select pg_try_advisory_lock(${options.key}::bigint) as locked, pg_backend_pid() as pid`,
      );
      if (!row?.locked) return;
      leaderPid = row.pid;
      await lead();
      return;
    }
    const [row] = await within(QUERY_TIMEOUT_MS, () => lock<Array<{ pid: number }>>`select pg_backend_pid() as pid`);
    if (row?.pid !== leaderPid) {
      options.log().warn({ singleton: options.name }, 'the lock connection was reset, so the lock is lost');
      await resign();
    }
  }

  function schedule(delayMs: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      ticking = tick()
        .catch(async (error: unknown) => {
          // Cannot prove we still hold the lock: another replica may already lead.
          if (leading) await resign();
          options.log().warn({ err: error, singleton: options.name }, 'leader election failed; will retry');
        })
        .finally(() => {
          ticking = null;
          schedule(nextElectionDelayMs(retryMs, workFailures));
        });
    }, delayMs);
    timer.unref();
  }

  return {
    isLeader: () => leading,
    start(): void {
      stopped = false;
      if (options.databaseUrl) {
        connection = postgres(options.databaseUrl, {
          max: 1,
          onnotice: () => {},
          // The connection must live as long as the process: recycling it would drop the lock.
          idle_timeout: 0,
          max_lifetime: null,
          connect_timeout: CONNECT_TIMEOUT_SECONDS,
          // After an outage, back within about 2 s like the pool (postgres.js's own delay grows to 20 s).
          backoff: reconnectDelaySeconds,
        });
      }
      schedule(0);
    },
    async stop(): Promise<void> {
      stopped = true;
      if (timer) clearTimeout(timer);
      await ticking;
      await resign();
      await connection?.end({ timeout: 5 });
      connection = null;
    },
  };
}

export type LeaderElection = ReturnType<typeof createLeaderElection>;
