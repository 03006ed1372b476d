import postgres from '../lib/postgres-driver.js';

/**
 * Wakes the other replicas (their long-polls, their outbox) once a change has committed.
 *
 * Not from inside the change's transaction: PostgreSQL makes every committing transaction that sent
 * NOTIFY take one cluster-wide lock and hold it through its commit, WAL flush included. With the
 * notifications inside the state changes, every state change of every replica committed one at a
 * time behind that lock (in `npm run bench` on a loaded machine, 21 % of the busy backends of one
 * replica and 59 % of two waited on it). Here they are sent after commit, on a connection of their own whose commits do
 * not wait for the WAL flush (`synchronous_commit = off`), so the lock is held for microseconds, and
 * the notifications of one turn of the event loop share one statement.
 *
 * A notification is a wake-up, not data: one lost to a crash right after the commit delays another
 * replica's long-poll or outbox until its next poll, and never loses a change.
 */
export interface Notifier {
  /** Resolves once PostgreSQL has taken the notifications; never rejects (failures go to `onFailure`). */
  send(messages: ReadonlyArray<readonly [channel: string, payload: string]>): Promise<void>;
  onFailure(listener: (error: unknown) => void): void;
  /**
   * Decides, batch by batch, which notifications go to PostgreSQL: `route` answers the ones to send
   * and does what it likes with the rest (a replica that knows no other replica is listening hands
   * its wake-ups to its own listeners instead: see replica-presence.ts). Without it, all are sent.
   */
  routeThrough(route: (messages: ReadonlyArray<readonly [channel: string, payload: string]>) => ReadonlyArray<readonly [string, string]>): void;
  close(): Promise<void>;
}

/**
 * One statement text whatever the batch's size, prepared once on the connection: a parameterised
 * statement postgres.js does not prepare is described before each run, a second round trip (and
 * socket write) for every wake-up sent.
 */
const NOTIFY_ALL = 'select pg_notify(n.channel, n.payload) from unnest($1::text[], $2::text[]) as n(channel, payload)';

export function createNotifier(url: string, options: { backoff?: (attempt: number) => number } = {}): Notifier {
  const connection = postgres(url, {
    max: 1,
    onnotice: () => {},
    ...(options.backoff ? { backoff: options.backoff } : {}),
    connection: { application_name: 'twokey-notifier', synchronous_commit: 'off' },
  });
  const failureListeners = new Set<(error: unknown) => void>();
  let route = (messages: ReadonlyArray<readonly [string, string]>) => messages;
  let pending: { messages: Map<string, readonly [string, string]>; sent: Promise<void> } | null = null;

  async function flush(batch: NonNullable<typeof pending>): Promise<void> {
    // Later sends start a batch of their own.
    pending = null;
    const messages = route([...batch.messages.values()]);
    if (messages.length === 0) return;
    try {
      await connection.unsafe(NOTIFY_ALL, [messages.map(([channel]) => channel), messages.map(([, payload]) => payload)], { prepare: true });
    } catch (error) {
      for (const listener of failureListeners) listener(error);
    }
  }

  return {
    send(messages) {
      if (messages.length === 0) return Promise.resolve();
      if (!pending) {
        const batch = { messages: new Map<string, readonly [string, string]>(), sent: Promise.resolve() };
        batch.sent = new Promise<void>((resolve) => setImmediate(resolve)).then(() => flush(batch));
        pending = batch;
      }
      // The same wake-up twice in one batch is one notification.
      for (const [channel, payload] of messages) pending.messages.set(`${channel}\u0000${payload}`, [channel, payload]);
      return pending.sent;
    },
    onFailure(listener) {
      failureListeners.add(listener);
    },
    routeThrough(router) {
      route = router;
    },
    async close() {
      await pending?.sent;
      await connection.end({ timeout: 5 });
    },
  };
}
