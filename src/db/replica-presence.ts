import type postgres from 'postgres';
import { PRESENCE_CHANNEL, WAKE_UP_CHANNELS } from './channels.js';
import type { Notifier } from './notifier.js';

/**
 * Which other replicas of twokey listen on this PostgreSQL database, so that a replica alone does
 * not send wake-ups nobody else would hear.
 *
 * Every change sends its wake-ups to PostgreSQL (notifier.ts) for the other replicas. A replica alone
 * — one machine, the common deployment — paid for each one anyway: a statement on the notifier's
 * connection, PostgreSQL signalling its listeners, and the same notification read back on its own
 * listening connection, only to wake what its own in-process feed had woken already. An MCP
 * pass-through call sent two, a chat cycle six.
 *
 * So each replica says it is here: `hello|<replica>` when it starts listening (and after every
 * reconnection of its listening connection), `here|<replica>` every `announceEveryMs` and in answer
 * to every hello (so a newcomer, or a replica whose listening connection came back, learns of the
 * replicas already running at once, not one interval later), `bye|<replica>` when it stops. A replica it has heard from within
 * `forgetAfterMs` counts as present. While none is, wake-ups are delivered in this process only,
 * exactly as PostgreSQL would have delivered them back (`deliverLocally`); presence notices always go
 * to PostgreSQL.
 *
 * A wake-up is a hint, never data (notifier.ts): a replica that has just started and is not yet
 * known may miss the wake-ups of the moment before its hello arrived, as it could miss one sent
 * while its listening connection was down. Its long-polls and outbox then act at their next poll.
 * A process that is not a serving replica (the CLI, a script) has no presence and always sends.
 */

export interface ReplicaPresenceOptions {
  /** The replica's own name (`services.replica`), as its notices carry it. */
  replica: string;
  client: Pick<postgres.Sql, 'listen'>;
  notifier: Notifier;
  /** Where wake-ups go while no other replica listens: this process's own listeners of each channel. */
  deliverLocally(channel: string, payload: string): void;
  /** How often a replica says it is still here; 10 s. */
  announceEveryMs?: number;
  /** How long after its last notice a replica still counts as present; 3 announcements. */
  forgetAfterMs?: number;
  now?: () => number;
}

export interface ReplicaPresence {
  /** The other replicas heard from recently, by name. */
  others(): string[];
  /** Says goodbye and stops listening and announcing. */
  stop(): Promise<void>;
}

const DEFAULT_ANNOUNCE_EVERY_MS = 10_000;
const BYE_WAIT_MS = 1_000;

export async function startReplicaPresence(options: ReplicaPresenceOptions): Promise<ReplicaPresence> {
  const { replica, notifier } = options;
  const announceEveryMs = options.announceEveryMs ?? DEFAULT_ANNOUNCE_EVERY_MS;
  const forgetAfterMs = options.forgetAfterMs ?? 3 * announceEveryMs;
  const now = options.now ?? Date.now;
  const lastHeard = new Map<string, number>();

  const announce = (kind: 'hello' | 'here' | 'bye') => notifier.send([[PRESENCE_CHANNEL, `${kind}|${replica}`]]);

  function others(): string[] {
    const since = now() - forgetAfterMs;
    for (const [name, at] of lastHeard) if (at < since) lastHeard.delete(name);
    return [...lastHeard.keys()];
  }

  function heard(payload: string): void {
    const bar = payload.indexOf('|');
    const kind = payload.slice(0, bar);
    const name = payload.slice(bar + 1);
    if (bar < 0 || !name || name === replica) return;
    if (kind === 'bye') {
      lastHeard.delete(name);
      return;
    }
    lastHeard.set(name, now());
    // Also to a replica already known: its hello after a reconnection means it may have forgotten us.
    if (kind === 'hello') void announce('here');
  }

  // Installed before the first hello, so no wake-up is sent meanwhile that the route would have kept.
  notifier.routeThrough((messages) => {
    if (others().length > 0) return messages;
    const toPostgres = [];
    for (const message of messages) {
      if (WAKE_UP_CHANNELS.has(message[0])) options.deliverLocally(message[0], message[1]);
      else toPostgres.push(message);
    }
    return toPostgres;
  });
  // postgres.js calls the last argument on every (re)subscription: after a reconnection, others may
  // have come or gone unheard.
  const subscription = await options.client.listen(PRESENCE_CHANNEL, heard, () => void announce('hello'));
  const timer = setInterval(() => void announce('here'), announceEveryMs);
  timer.unref();

  return {
    others,
    async stop() {
      clearInterval(timer);
      notifier.routeThrough((messages) => messages);
      // Not waited for long: with the database away, stopping must not wait on its reconnection.
      await Promise.race([announce('bye'), new Promise((resolve) => setTimeout(resolve, BYE_WAIT_MS).unref())]);
      await subscription.unlisten().catch(() => undefined);
    },
  };
}
