import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { createNotifier } from '../../src/db/notifier.js';
import { PROPOSAL_CHANNEL, createStore } from '../../src/db/store.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { freePort } from '../support/processes.js';
import { listenOutside, type HeardNotification } from '../support/notification-listener.js';
import { startTcpProxy } from '../support/tcp-proxy.js';

describeOnPostgres('wake-ups for other replicas', (driver) => {
  let database: Database & { url?: string };
  let listener: Awaited<ReturnType<typeof listenOutside>>;
  let heard: HeardNotification[];
  beforeAll(async () => {
    database = await openTestDatabase(driver);
    listener = await listenOutside(database.url ?? '', [PROPOSAL_CHANNEL]);
    heard = listener.heard;
  }, 180_000);
  afterAll(async () => {
    await listener.close();
    await database.close();
  });

  const until = async (condition: () => boolean) => {
    for (let i = 0; i < 500 && !condition(); i += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  };
  const heardOf = (payload: string) => heard.filter((message) => message.payload === payload);

  it('are sent after a change commits, by the notifier rather than the change, and never for one rolled back', async () => {
    const store = createStore(database.db, { notifier: database.notifier });
    await expect(
      store.transaction(async (tx) => {
        await tx.notifyChange('prp_rolled_back');
        throw new Error('the change fails');
      }),
    ).rejects.toThrow('the change fails');
    await store.transaction((tx) => tx.notifyChange('prp_committed'));
    await until(() => heardOf('prp_committed').length > 0);
    const [notifier] = (await database.db.execute(
      sql`select pid from pg_stat_activity where datname = current_database() and application_name = 'twokey-notifier'`,
    )) as unknown as Array<{ pid: number }>;
    // Sent from the notifier's own connection: the change's transaction never took PostgreSQL's
    // cluster-wide NOTIFY lock.
    expect(heardOf('prp_committed')).toEqual([{ channel: PROPOSAL_CHANNEL, payload: 'prp_committed', senderPid: notifier?.pid }]);
    expect(heardOf('prp_rolled_back')).toEqual([]);
  });

  it('send their statement as one prepared once per connection: a wake-up costs one round trip, not a describe and a run', async () => {
    const proxy = await startTcpProxy(Number(new URL(database.url ?? '').port || 5432));
    const through = new URL(database.url ?? '');
    through.port = String(proxy.port);
    const notifier = createNotifier(through.toString());
    try {
      for (const payload of ['prp_one', 'prp_two', 'prp_three']) await notifier.send([[PROPOSAL_CHANNEL, payload]]);
      await until(() => heardOf('prp_three').length > 0);
      expect(heardOf('prp_two')).toHaveLength(1);
      // The statement's text goes over the wire in a Parse message: once when prepared, every time when not.
      const text = proxy.sentByClients().toString('latin1');
      expect(text.split('pg_notify(n.channel').length - 1).toBe(1);
    } finally {
      await notifier.close();
      await proxy.close();
    }
  });

  it('turn the same wake-up asked twice at one moment into one notification, and report a database they cannot reach', async () => {
    const notifier = createNotifier(database.url ?? '');
    await Promise.all([notifier.send([[PROPOSAL_CHANNEL, 'prp_batched']]), notifier.send([[PROPOSAL_CHANNEL, 'prp_batched']])]);
    await until(() => heardOf('prp_batched').length > 0);
    expect(heardOf('prp_batched')).toHaveLength(1);
    await notifier.close();

    const unreachable = new URL(database.url ?? '');
    unreachable.port = String(await freePort());
    const failing = createNotifier(unreachable.toString(), { backoff: () => 0.01 });
    const failures: unknown[] = [];
    failing.onFailure((error) => failures.push(error));
    // Resolves all the same: the change it tells of is saved already.
    await expect(failing.send([[PROPOSAL_CHANNEL, 'prp_nowhere']])).resolves.toBeUndefined();
    expect(failures).toHaveLength(1);
    await failing.close();
  });
});
