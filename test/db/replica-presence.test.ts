import postgres from 'postgres';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { JOBS_CHANNEL, PRESENCE_CHANNEL, PROPOSAL_CHANNEL } from '../../src/db/channels.js';
import type { Database } from '../../src/db/database.js';
import { createNotifier, type Notifier } from '../../src/db/notifier.js';
import { startReplicaPresence, type ReplicaPresence } from '../../src/db/replica-presence.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { listenOutside, type HeardNotification } from '../support/notification-listener.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { startTestTwokey } from '../support/twokey.js';

/** One replica's side of it: its own listening connection, notifier and presence, as `twokey serve` wires them. */
interface Replica {
  name: string;
  notifier: Notifier;
  presence: ReplicaPresence;
  delivered: Array<[string, string]>;
  close(): Promise<void>;
}

/** A channel no replica knows: a notification on it goes to PostgreSQL, behind whatever the same notifier sent before. */
const BARRIER_CHANNEL = 'twokey_test_barrier';

describeOnPostgres('which replicas listen, so a replica alone keeps its wake-ups to itself', (driver) => {
  let database: Database & { url?: string };
  // What reached PostgreSQL, heard by a connection that is not a replica (it never says hello).
  let outsider: Awaited<ReturnType<typeof listenOutside>>;
  let heard: HeardNotification[];

  beforeAll(async () => {
    database = await openTestDatabase(driver);
    outsider = await listenOutside(database.url ?? '', [PROPOSAL_CHANNEL, JOBS_CHANNEL, PRESENCE_CHANNEL, BARRIER_CHANNEL]);
    heard = outsider.heard;
  }, 180_000);
  afterAll(async () => {
    await outsider.close();
    await database.close();
  });

  async function startReplica(name: string, now?: () => number, notifierUrl = database.url ?? ''): Promise<Replica> {
    const client = postgres(database.url ?? '', { max: 1, onnotice: () => {} });
    const notifier = createNotifier(notifierUrl);
    const delivered: Array<[string, string]> = [];
    const presence = await startReplicaPresence({
      replica: name,
      client,
      notifier,
      deliverLocally: (channel, payload) => delivered.push([channel, payload]),
      ...(now ? { now } : {}),
    });
    return {
      name,
      notifier,
      presence,
      delivered,
      async close() {
        await presence.stop();
        await notifier.close();
        await client.end({ timeout: 1 });
      },
    };
  }

  const heardOn = (channel: string) => heard.filter((message) => message.channel === channel).map((message) => message.payload);
  /** Sends a wake-up and waits until it has gone either way (to PostgreSQL, or delivered here). */
  async function wake(replica: Replica, payload: string): Promise<void> {
    await replica.notifier.send([
      [PROPOSAL_CHANNEL, payload],
      [JOBS_CHANNEL, `${replica.name}|callback.deliver`],
    ]);
  }

  it('alone: wake-ups are delivered in the process and none reaches PostgreSQL; with another replica, they all go to PostgreSQL', async () => {
    const first = await startReplica('r_first');
    try {
      await vi.waitFor(() => expect(heardOn(PRESENCE_CHANNEL)).toContain('hello|r_first'));
      await wake(first, 'prp_alone');
      expect(first.delivered).toEqual([
        [PROPOSAL_CHANNEL, 'prp_alone'],
        [JOBS_CHANNEL, 'r_first|callback.deliver'],
      ]);

      const second = await startReplica('r_second');
      try {
        // The newcomer's hello is answered at once, not one announcement interval later.
        await vi.waitFor(() => {
          expect(first.presence.others()).toEqual(['r_second']);
          expect(second.presence.others()).toEqual(['r_first']);
        });
        await wake(first, 'prp_with_another');
        await vi.waitFor(() => expect(heardOn(PROPOSAL_CHANNEL)).toEqual(['prp_with_another']));
        expect(heardOn(JOBS_CHANNEL)).toEqual(['r_first|callback.deliver']);
        expect(first.delivered.map(([, payload]) => payload)).not.toContain('prp_with_another');
      } finally {
        await second.close();
      }

      // The other said goodbye: alone again at once.
      await vi.waitFor(() => expect(first.presence.others()).toEqual([]));
      await wake(first, 'prp_alone_again');
      expect(first.delivered.map(([, payload]) => payload)).toContain('prp_alone_again');
      expect(heardOn(PROPOSAL_CHANNEL)).not.toContain('prp_alone_again');
    } finally {
      await first.close();
    }
  });

  it('a replica not heard from for three announcements no longer counts, and one that speaks again counts again', async () => {
    let clock = 1_000_000;
    const watcher = await startReplica('r_watcher', () => clock);
    // The watcher's hello is out before the speaker listens: otherwise the speaker may answer it
    // at any moment, after the clock below has moved, and count as heard again.
    await vi.waitFor(() => expect(heardOn(PRESENCE_CHANNEL)).toContain('hello|r_watcher'));
    const speaker = await startReplica('r_speaker');
    try {
      await vi.waitFor(() => expect(watcher.presence.others()).toEqual(['r_speaker']));
      // The watcher's answer to the speaker's hello has gone out too: nothing more comes from either.
      await vi.waitFor(() => expect(heardOn(PRESENCE_CHANNEL)).toContain('here|r_watcher'));
      clock += 29_000;
      expect(watcher.presence.others()).toEqual(['r_speaker']);
      clock += 2_000;
      expect(watcher.presence.others()).toEqual([]);
      await wake(watcher, 'prp_after_silence');
      expect(watcher.delivered.map(([, payload]) => payload)).toContain('prp_after_silence');
      // Its next announcement (sent here by hand rather than after 10 s).
      await speaker.notifier.send([[PRESENCE_CHANNEL, 'here|r_speaker']]);
      await vi.waitFor(() => expect(watcher.presence.others()).toEqual(['r_speaker']));
    } finally {
      await speaker.close();
      await watcher.close();
    }
  });

  it("answers every hello, a known replica's too (after a reconnection it may have forgotten the others)", async () => {
    const a = await startReplica('r_a');
    const b = await startReplica('r_b');
    try {
      await vi.waitFor(() => expect(b.presence.others()).toEqual(['r_a']));
      const answers = () => heardOn(PRESENCE_CHANNEL).filter((payload) => payload === 'here|r_a').length;
      // a's answer to b's first hello is out before counting: otherwise it may land after `before`.
      await vi.waitFor(() => expect(answers()).toBeGreaterThanOrEqual(1));
      const before = answers();
      await b.notifier.send([[PRESENCE_CHANNEL, 'hello|r_b']]);
      await vi.waitFor(() => expect(answers()).toBe(before + 1));
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('stops without waiting on a database that does not answer: its goodbye is not waited for', async () => {
    const target = new URL(database.url ?? '');
    const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
    target.port = String(proxy.port);
    const held = await startReplica('r_held', undefined, target.toString());
    try {
      await vi.waitFor(() => expect(heardOn(PRESENCE_CHANNEL)).toContain('hello|r_held'));
      proxy.hold();
      // Its goodbye is never answered while held: waited for, stopping would last until the test's timeout.
      await held.presence.stop();
      expect(heardOn(PRESENCE_CHANNEL)).not.toContain('bye|r_held');
    } finally {
      proxy.release();
      await held.close();
      await proxy.close();
    }
  });

  it('ignores its own notices and malformed ones', async () => {
    const lone = await startReplica('r_lone');
    try {
      await lone.notifier.send([
        [PRESENCE_CHANNEL, 'here|r_lone'],
        [PRESENCE_CHANNEL, 'no bar here'],
        [PRESENCE_CHANNEL, 'here|'],
      ]);
      await vi.waitFor(() => expect(heardOn(PRESENCE_CHANNEL)).toContain('no bar here'));
      expect(lone.presence.others()).toEqual([]);
    } finally {
      await lone.close();
    }
  });

  it('a lone twokey replica: its long-polls wake at once, and no wake-up of its changes is sent to PostgreSQL', async () => {
    const twokey = await startTestTwokey({ driver, database, longPollIntervalMs: 600_000 });
    try {
      await vi.waitFor(() => expect(heardOn(PRESENCE_CHANNEL)).toContain(`hello|${twokey.services.replica}`));
      const before = heard.length;
      const { apiKey } = await twokey.createAgent('lone');
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } } });
      const polled = twokey.request('GET', `/v1/proposals/${proposed.body.id}?wait=60`, { apiKey });
      await vi.waitFor(() => expect(twokey.services.changes.watchers(proposed.body.id)).toBe(1));
      await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
      expect((await polled).body.status).toBe('approved');
      // Through the same notifier, after those changes' wake-ups: once it is heard, any of them sent
      // to PostgreSQL would have been heard before it (one connection, delivered in order).
      await database.notifier?.send([[BARRIER_CHANNEL, 'after the approval']]);
      await vi.waitFor(() => expect(heardOn(BARRIER_CHANNEL)).toContain('after the approval'));
      expect(heard.slice(before).filter((message) => message.channel !== PRESENCE_CHANNEL && message.channel !== BARRIER_CHANNEL)).toEqual([]);

      const other = await startReplica('r_other');
      try {
        await vi.waitFor(() => expect(other.presence.others()).toEqual([twokey.services.replica]));
        await twokey.services.proposals.reject(
          (await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } } })).body.id,
          { identity: 'web:alice', via: 'test' },
        );
        await vi.waitFor(() => expect(heard.slice(before).filter((message) => message.channel === PROPOSAL_CHANNEL).length).toBeGreaterThan(0));
      } finally {
        await other.close();
      }
    } finally {
      await twokey.close();
    }
  });
});
