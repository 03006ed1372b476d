import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { createDiscordIntegration, type DiscordIntegration } from '../../src/discord/index.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { startFakeDiscord, type FakeDiscord, type GatewayConnection } from './fake-discord.js';
import {
  ALICE,
  APPLICATION_ID,
  BOT_TOKEN,
  MALLORY,
  OWNER,
  buttonPress,
  eventually,
  discordConfigYaml,
  startDiscordTwokey,
  type DiscordTwokey,
} from './helpers.js';

const openConnections = (fake: FakeDiscord): GatewayConnection[] => fake.gateways.filter((g) => !g.closed && g.identify);

const callbacksOf = (fake: FakeDiscord, interactionId: string) =>
  fake.callsTo('POST', /^\/interactions\//).filter((c) => c.path.startsWith(`/interactions/${interactionId}/`));

describe('Discord gateway mode (pglite)', () => {
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver: 'pglite', http: false, env: { DISCORD_GATEWAY: 'true' } });
  });
  afterAll(() => t.close());

  it('connects (HELLO, IDENTIFY → READY, heartbeats) and takes a button press end to end', async () => {
    await eventually(() => expect(openConnections(t.fake)).toHaveLength(1), { timeout: 10_000 });
    const [connection] = openConnections(t.fake);
    expect(connection?.identify).toMatchObject({ token: BOT_TOKEN, intents: 0 });
    // discord.js drops a connection whose last heartbeat went unacknowledged by the next one: a 1 s
    // interval leaves room for a starved event loop, where a shorter one made it reconnect mid-test.
    await eventually(() => expect(connection?.heartbeats).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
    await eventually(() => expect(t.discord.gateway?.isConnected()).toBe(true));
    // No HTTP endpoint without DISCORD_PUBLIC_KEY.
    expect((await t.twokey.app.inject({ method: 'POST', url: '/discord/interactions', payload: '{}' })).statusCode).toBe(404);

    const { id } = await t.propose('delete_workspace', { workspace: 'w' });
    await eventually(() => expect(t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/)).toHaveLength(1));

    const stranger = buttonPress(`twokey:approve:${id}`, { userId: MALLORY });
    const current = () => openConnections(t.fake)[0];
    current()?.dispatch('INTERACTION_CREATE', stranger);
    await eventually(() => expect(callbacksOf(t.fake, stranger.id)).toHaveLength(1));
    expect(callbacksOf(t.fake, stranger.id)[0]).toMatchObject({
      path: `/interactions/${stranger.id}/${stranger.token}/callback`,
      authorization: undefined,
      body: { type: 4, data: { flags: 64 } },
    });

    const press = buttonPress(`twokey:approve:${id}`, { userId: ALICE });
    current()?.dispatch('INTERACTION_CREATE', press);
    await eventually(() => expect(callbacksOf(t.fake, press.id)).toHaveLength(1));
    expect(callbacksOf(t.fake, press.id)[0]?.body).toEqual({ type: 6 });
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('committed'));
    await eventually(() => expect(t.fake.callsTo('PATCH', /^\/channels\//).at(-1)?.body.embeds[0].fields[0].value).toMatch(/Committed/));

    const logs = t.twokey.logs.join('');
    expect(logs).not.toContain(BOT_TOKEN);
    expect(logs).not.toContain(press.token);
    expect(logs).not.toContain(stranger.token);
  });
});

// PostgreSQL only: the embedded database is one process, so there is no second replica to elect.
describeOnPostgres('Discord gateway leader election', () => {
  let fake: FakeDiscord;
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  interface Replica {
    running: TestTwokey;
    discord: DiscordIntegration;
    logs: string[];
    closed: boolean;
    close(): Promise<void>;
  }
  const replicas: Replica[] = [];
  const leaders = () => replicas.filter((r) => !r.closed && r.discord.gateway?.isConnected());

  async function startReplica(): Promise<Replica> {
    if (!database.url) throw new Error('no database url');
    // Each replica has its own pool on the shared database, like separate processes.
    const own = await openDatabase({ databaseUrl: database.url, dataDir: '', poolSize: 4 });
    let discord: DiscordIntegration | undefined;
    const running = await startTestTwokey({
      driver: 'postgres',
      database: own,
      configYaml: discordConfigYaml,
      env: {
        DISCORD_BOT_TOKEN: BOT_TOKEN,
        DISCORD_APPLICATION_ID: APPLICATION_ID,
        DISCORD_GATEWAY: 'true',
        DISCORD_API_URL: fake.apiUrl,
      },
      integrations: (services, env, wiring) => {
        discord = createDiscordIntegration({
          env,
          services,
          elect: wiring.elect,
          tuning: { gatewayRetryMs: 200 },
        });
        return [discord];
      },
    });
    if (!discord) throw new Error('no integration');
    const replica: Replica = {
      running,
      discord,
      logs: running.logs,
      closed: false,
      async close() {
        if (replica.closed) return;
        replica.closed = true;
        await running.close();
        await own.close();
      },
    };
    replicas.push(replica);
    return replica;
  }

  beforeAll(async () => {
    fake = await startFakeDiscord({ applicationId: APPLICATION_ID });
    database = await openTestDatabase('postgres');
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    await database.close();
    await fake.close();
  });

  it('holds exactly one gateway connection across two replicas, and moves it when the holder stops', async () => {
    const first = await startReplica();
    const second = await startReplica();
    await eventually(() => expect(openConnections(fake)).toHaveLength(1), { timeout: 10_000 });
    // Several lock attempts by the standby later, still one connection.
    await new Promise((done) => setTimeout(done, 1_000));
    expect(openConnections(fake)).toHaveLength(1);
    expect(fake.gateways.filter((g) => g.identify)).toHaveLength(1);
    const leader = first.discord.gateway?.isConnected() ? first : second;
    const standby = leader === first ? second : first;
    expect(standby.discord.gateway?.isConnected()).toBe(false);

    const agent = await leader.running.services.agents.create({ name: 'argus', owners: [`discord:user:${OWNER}`] });
    const { proposal } = await leader.running.services.proposals.propose(agent.agent, { operation: 'delete_workspace', params: { workspace: 'w' } });

    await leader.close();
    await eventually(() => expect(standby.discord.gateway?.isConnected()).toBe(true), { timeout: 10_000 });
    await eventually(() => expect(openConnections(fake)).toHaveLength(1));
    expect(fake.gateways.filter((g) => g.identify)).toHaveLength(2);

    const press = buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE });
    openConnections(fake)[0]?.dispatch('INTERACTION_CREATE', press);
    await eventually(async () => expect((await standby.running.services.proposals.get(proposal.id)).status).toBe('committed'));
    expect(callbacksOf(fake, press.id)[0]?.body).toEqual({ type: 6 });
  });

  it('moves the gateway when the holder dies (its lock connection is cut)', async () => {
    expect(leaders()).toHaveLength(1);
    const [oldConnection] = openConnections(fake);
    const identified = fake.gateways.filter((g) => g.identify).length;
    const third = await startReplica();
    await new Promise((done) => setTimeout(done, 500));
    expect(third.discord.gateway?.isConnected()).toBe(false);
    const admin = database.client;
    if (!admin) throw new Error('no client');
    // What a crash looks like to PostgreSQL: the lock's session ends, the lock frees.
    await admin`select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and objid = ${0x74776b64} and granted`;
    // The holder notices within one check and disconnects; one replica (either) connects again.
    await eventually(() => expect(oldConnection?.closed).toBe(true), { timeout: 10_000 });
    await eventually(() => expect(fake.gateways.filter((g) => g.identify)).toHaveLength(identified + 1), { timeout: 10_000 });
    await new Promise((done) => setTimeout(done, 1_000));
    expect(leaders()).toHaveLength(1);
    expect(openConnections(fake)).toHaveLength(1);
  });
});
