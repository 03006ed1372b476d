import postgres from 'postgres';
import type { Logger } from 'pino';

/**
 * Elects one replica for work that must run once per fleet (the sweeper, the Discord gateway
 * connection): the holder of a PostgreSQL session-level advisory lock, kept on a dedicated
 * connection. When the holder dies its connection closes, the lock frees, and another replica
 * takes it on its next try. On the embedded database there is one process, so it always leads.
 * The lock lives on a client of its own with one connection: a pooled connection could be handed
 * to other work, and a reserved one does not survive its session being killed.
 */
export function createSingleton(options: {
  /** PostgreSQL URL; undefined on the embedded database. */
  databaseUrl: string | undefined;
  key: number;
  logger: Logger;
  name: string;
  retryMs?: number;
  onElected?(): void | Promise<void>;
  onDeposed?(): void | Promise<void>;
}) {
  const retryMs = options.retryMs ?? 2_000;
  let leader = false;
  let connection: postgres.Sql | null = null;
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;

  async function lose() {
    const wasLeader = leader;
    leader = false;
    const closing = connection;
    connection = null;
    await closing?.end({ timeout: 1 }).catch(() => undefined);
    if (wasLeader) await options.onDeposed?.();
  }

  async function attempt() {
    if (stopped) return;
    try {
      if (!options.databaseUrl) {
        if (!leader) {
          leader = true;
          await options.onElected?.();
        }
        return;
      }
      if (leader && connection) {
        // postgres.js reconnects silently, so ask whether *this* session still holds the lock.
        const [held] = await connection<Array<{ held: boolean }>>`
          select exists (select 1 from pg_locks where locktype = 'advisory' and granted and pid = pg_backend_pid()
            and ((classid::bigint << 32) | objid::bigint) = ${options.key}) as held`;
        if (held?.held) return;
        throw new Error('the advisory lock is no longer held by this session');
      }
      connection ??= postgres(options.databaseUrl, { max: 1, idle_timeout: 0, onnotice: () => {} });
      const [row] = await connection<Array<{ locked: boolean }>>`select pg_try_advisory_lock(${options.key}) as locked`;
      if (row?.locked) {
        leader = true;
        options.logger.info({ singleton: options.name }, 'this replica now runs the singleton');
        await options.onElected?.();
      }
    } catch (error) {
      if (leader) options.logger.warn({ err: error, singleton: options.name }, 'lost the singleton lock');
      await lose();
    } finally {
      if (!stopped) timer = setTimeout(() => void attempt(), retryMs);
      timer?.unref();
    }
  }

  return {
    isLeader: () => leader,
    start() {
      stopped = false;
      void attempt();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (leader && connection) await connection`select pg_advisory_unlock(${options.key})`.catch(() => undefined);
      await lose();
    },
  };
}

export type Singleton = ReturnType<typeof createSingleton>;
