import { Client, Events, GatewayDispatchEvents } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import postgres from 'postgres';

/**
 * The advisory lock that elects the one replica holding the Discord gateway connection. Any constant
 * works as long as every twokey process on the database uses the same one ("twkd").
 */
export const GATEWAY_LOCK_KEY = 0x74776b64;

export interface GatewayOptions {
  apiUrl: string;
  botToken: string;
  /** PostgreSQL URL for the dedicated lock connection; undefined on the embedded database (one process). */
  lockDatabaseUrl: string | undefined;
  /** How often a standby replica tries to take the lock, and the leader checks it still holds it. */
  retryMs: number;
  logger: () => FastifyBaseLogger;
  onInteraction(payload: unknown): void;
}

export interface DiscordGateway {
  start(): void;
  stop(): Promise<void>;
  /** True while this process holds a logged-in gateway connection. */
  isConnected(): boolean;
}

/** Bounds a lock-connection query: a connection that hangs must not keep a stale leader connected. */
function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}

/**
 * Receives interactions over the Discord gateway (discord.js `Client`), for installs without a public
 * URL. Discord delivers every interaction to every connected session, so only one replica connects:
 * on PostgreSQL, the holder of a session-level advisory lock. The lock lives on a connection of its
 * own (not one borrowed from the pool) so that when the holder dies, its connection closes, PostgreSQL
 * frees the lock and a standby takes over within `retryMs`.
 */
export function createDiscordGateway(options: GatewayOptions): DiscordGateway {
  const { logger } = options;
  let client: Client | null = null;
  let lockSql: postgres.Sql | null = null;
  /** Backend pid of the lock session while this replica leads: a different pid means a reconnect, so the lock is gone. */
  let leaderPid: number | null = null;
  let timer: NodeJS.Timeout | null = null;
  let tickRunning: Promise<void> | null = null;
  let stopped = false;
  let failures = 0;

  async function connect(): Promise<Client> {
    const next = new Client({ intents: [], rest: { api: options.apiUrl } });
    // Raw payloads, so the gateway and the HTTP endpoint share one interaction handler.
    next.ws.on(GatewayDispatchEvents.InteractionCreate, (data: unknown) => options.onInteraction(data));
    next.on(Events.Error, (error) => logger().warn({ err: error }, 'Discord gateway error'));
    next.on(Events.ShardDisconnect, (event) => logger().warn({ code: event.code }, 'Discord gateway disconnected'));
    try {
      await next.login(options.botToken);
    } catch (error) {
      await next.destroy().catch(() => undefined);
      throw error;
    }
    logger().info({ leader: leaderPid !== null }, 'Discord gateway connected');
    return next;
  }

  async function disconnect(): Promise<void> {
    const current = client;
    client = null;
    if (current) await current.destroy().catch((error: unknown) => logger().warn({ err: error }, 'Discord gateway did not close cleanly'));
  }

  async function resign(): Promise<void> {
    leaderPid = null;
    await disconnect();
    // unlock_all: a session lock taken twice needs two unlocks; this connection holds nothing else.
    if (lockSql) await within(5_000, lockSql`select pg_advisory_unlock_all()`).catch(() => undefined);
  }

  async function tickEmbedded(): Promise<void> {
    if (!client) client = await connect();
  }

  async function tickElected(sql: postgres.Sql): Promise<void> {
    if (leaderPid === null) {
      const [row] = await within(
        5_000,
        sql<{ locked: boolean; pid: number }[]>`select pg_try_advisory_lock(${GATEWAY_LOCK_KEY}::bigint) as locked, pg_backend_pid() as pid`,
      );
      if (!row?.locked) return;
      leaderPid = row.pid;
      logger().info('Discord gateway: this replica holds the gateway lock');
      try {
        client = await connect();
      } catch (error) {
        // Let another replica try: the failure may be this one's network.
        await resign();
        throw error;
      }
      return;
    }
    const [row] = await within(5_000, sql<{ pid: number }[]>`select pg_backend_pid() as pid`);
    if (row?.pid !== leaderPid) {
      logger().warn('Discord gateway: the lock connection was reset, so the lock is lost; disconnecting');
      await resign();
    }
  }

  async function tick(): Promise<void> {
    try {
      await (lockSql ? tickElected(lockSql) : tickEmbedded());
      failures = 0;
    } catch (error) {
      failures += 1;
      if (leaderPid !== null) {
        // Cannot prove we still hold the lock: another replica may already lead.
        logger().warn({ err: error }, 'Discord gateway: lost the lock connection; disconnecting');
        await resign();
      } else {
        logger().warn({ err: error }, 'Discord gateway: could not connect; will retry');
      }
    }
  }

  function schedule(delayMs: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      tickRunning = tick().finally(() => {
        tickRunning = null;
        // Back off after repeated failures (a wrong token, Discord down), up to a minute.
        schedule(Math.min(options.retryMs * 2 ** Math.min(failures, 6), 60_000));
      });
    }, delayMs);
    timer.unref();
  }

  return {
    start() {
      if (options.lockDatabaseUrl) {
        lockSql = postgres(options.lockDatabaseUrl, {
          max: 1,
          onnotice: () => {},
          // The connection must live as long as the process: recycling it would drop the lock.
          idle_timeout: 0,
          max_lifetime: null,
          connect_timeout: 10,
        });
      }
      schedule(0);
    },

    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await tickRunning;
      await resign();
      await lockSql?.end({ timeout: 5 });
      lockSql = null;
    },

    isConnected: () => client !== null,
  };
}
