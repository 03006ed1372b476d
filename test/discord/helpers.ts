import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { vi } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { createDiscordIntegration, type DiscordIntegration, type DiscordTuning } from '../../src/discord/index.js';
import type { Database } from '../../src/db/database.js';
import type { Driver } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { snowflake, startFakeDiscord, type FakeDiscord } from './fake-discord.js';

export const APPLICATION_ID = '1200000000000000001';
export const CHANNEL = '1200000000000000002';
export const GUILD = '1200000000000000003';
export const ALICE = '1200000000000000011';
export const BOB = '1200000000000000012';
export const CAROL = '1200000000000000013'; // holds the ops role only
export const OWNER = '1200000000000000014'; // owns the agent, and is on the approvers list too
export const MALLORY = '1200000000000000015';
export const OPS_ROLE = '1200000000000000021';
export const OTHER_ROLE = '1200000000000000022';

/** Not shaped like a real bot token, so only twokey's own care (not the log scrubber) keeps it out of logs. */
export const BOT_TOKEN = `test-bot-token-${randomBytes(12).toString('hex')}`;

export const discordConfigYaml = configYaml([
  deleteWorkspaceOperation({
    confirmationType: 'verification',
    amountCents: true,
    cost: '{{params.amount_cents | usd}}',
    expiresIn: '5m',
    approvers: [`discord:user:${ALICE}`, `discord:role:${OPS_ROLE}`, `discord:user:${OWNER}`],
    quorum: 1,
    discord: CHANNEL,
    commit: 'on_approve',
  }),
  `  - name: rotate_keys
    description: Rotate the production signing keys
    params:
      type: object
      required: [service]
      properties:
        service: { type: string }
    summary: "{{agent}} wants to rotate the keys of {{params.service}}."
    approval:
      approvers: [discord:user:${ALICE}, discord:user:${BOB}]
      quorum: 2
      discord: { channel: "${CHANNEL}" }
    commit: on_approve
    executor: { type: echo }
`,
]);

/**
 * Waits for chat updates and gateway events, which happen after the request that caused them. The
 * generous timeout is for a loaded two-core CI machine; a passing check returns at once.
 */
export function eventually<T>(check: () => T | Promise<T>, options: { timeout?: number } = {}): Promise<T> {
  return vi.waitFor(check, { timeout: options.timeout ?? 10_000, interval: 20 });
}

/** Signs like Discord: Ed25519 over `timestamp + body`, with a key pair made for the test. */
export function makeSigner() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  // The SPKI DER of an Ed25519 key is a 12-byte prefix and the 32 raw bytes Discord shows in its portal.
  const publicKeyHex = publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('hex');
  return {
    publicKeyHex,
    headers(body: string, timestampSeconds: number): Record<string, string> {
      const signature = sign(null, Buffer.from(`${timestampSeconds}${body}`), privateKey).toString('hex');
      return {
        'content-type': 'application/json',
        'x-signature-ed25519': signature,
        'x-signature-timestamp': String(timestampSeconds),
      };
    },
  };
}

export interface Clicker {
  userId: string;
  roles?: string[];
}

/** A fresh interaction token, distinctive enough to find anywhere in the logs. */
export const interactionToken = (): string => `itok-${randomBytes(24).toString('hex')}`;

export function buttonPress(customId: string, clicker: Clicker, overrides: { id?: string; token?: string } = {}) {
  return {
    id: overrides.id ?? snowflake(),
    application_id: APPLICATION_ID,
    type: 3,
    token: overrides.token ?? interactionToken(),
    version: 1,
    guild_id: GUILD,
    channel_id: CHANNEL,
    // Fields Discord always sends (discord.js's own interaction classes read them in gateway mode).
    app_permissions: '0',
    entitlements: [],
    authorizing_integration_owners: { '0': GUILD },
    context: 0,
    locale: 'en-US',
    guild_locale: 'en-US',
    attachment_size_limit: 8_388_608,
    member: { user: { id: clicker.userId, username: `user${clicker.userId.slice(-2)}` }, roles: clicker.roles ?? [], permissions: '0' },
    message: { id: snowflake(), channel_id: CHANNEL },
    data: { custom_id: customId, component_type: 2 },
  };
}

export function modalSubmit(customId: string, clicker: Clicker, reason: string, overrides: { token?: string } = {}) {
  return {
    id: snowflake(),
    application_id: APPLICATION_ID,
    type: 5,
    token: overrides.token ?? interactionToken(),
    version: 1,
    guild_id: GUILD,
    channel_id: CHANNEL,
    // Fields Discord always sends (discord.js's own interaction classes read them in gateway mode).
    app_permissions: '0',
    entitlements: [],
    authorizing_integration_owners: { '0': GUILD },
    context: 0,
    locale: 'en-US',
    guild_locale: 'en-US',
    attachment_size_limit: 8_388_608,
    member: { user: { id: clicker.userId, username: 'someone' }, roles: clicker.roles ?? [], permissions: '0' },
    // The Label layout Discord sends back for the modal twokey opens.
    data: { custom_id: customId, components: [{ type: 18, id: 1, component: { type: 4, id: 2, custom_id: 'reason', value: reason } }] },
  };
}

/**
 * The "Approve for…" form as Discord sends it back: Label components around the duration and bounds
 * select menus and the uses text input. `duration` and `bounds` go in as given, so a test can send
 * what no Discord client would.
 */
export function grantFormSubmit(customId: string, clicker: Clicker, form: { duration?: unknown; uses?: string; bounds?: unknown }) {
  const labelled = (id: number, component: Record<string, unknown>) => ({ type: 18, id, component });
  const components = [
    ...(form.duration === undefined ? [] : [labelled(1, { type: 3, id: 2, custom_id: 'duration', values: form.duration })]),
    labelled(3, { type: 4, id: 4, custom_id: 'uses', value: form.uses ?? '' }),
    ...(form.bounds === undefined ? [] : [labelled(5, { type: 3, id: 6, custom_id: 'bounds', values: form.bounds })]),
  ];
  const submit = modalSubmit(customId, clicker, '');
  return { ...submit, data: { custom_id: customId, components } };
}

export interface DiscordTwokey {
  twokey: TestTwokey;
  fake: FakeDiscord;
  discord: DiscordIntegration;
  signer: ReturnType<typeof makeSigner>;
  apiKey: string;
  /** Sends a signed interaction to POST /discord/interactions. */
  interact(payload: unknown, options?: { timestamp?: number }): Promise<{ status: number; body: any }>;
  /** Proposes as the agent through the HTTP API; returns the proposal id and the agent's confirmation token. */
  propose(operation: string, params: Record<string, unknown>): Promise<{ id: string; confirmToken: string }>;
  close(): Promise<void>;
}

export async function startDiscordTwokey(options: {
  driver: Driver;
  clock?: () => Date;
  executorFor?: (operation: string) => Executor;
  env?: Record<string, string>;
  /** false: no DISCORD_PUBLIC_KEY, so no HTTP endpoint (gateway-only installs). */
  http?: boolean;
  tuning?: Partial<DiscordTuning>;
  /** Defaults to `discordConfigYaml`. */
  configYaml?: string;
  outboxPollMs?: number;
  /** A database the caller opened (and closes), e.g. through a proxy it can cut. */
  database?: Database;
}): Promise<DiscordTwokey> {
  const fake = await startFakeDiscord({ applicationId: APPLICATION_ID });
  const signer = makeSigner();
  let discord: DiscordIntegration | undefined;
  const twokey = await startTestTwokey({
    driver: options.driver,
    chatPayloads: () => fake.calls.map((call) => call.body),
    configYaml: options.configYaml ?? discordConfigYaml,
    clock: options.clock,
    outboxPollMs: options.outboxPollMs,
    executorFor: options.executorFor,
    ...(options.database ? { database: options.database } : {}),
    env: {
      DISCORD_BOT_TOKEN: BOT_TOKEN,
      DISCORD_APPLICATION_ID: APPLICATION_ID,
      ...(options.http === false ? {} : { DISCORD_PUBLIC_KEY: signer.publicKeyHex }),
      DISCORD_API_URL: fake.apiUrl,
      ...options.env,
    },
    integrations: (services, env, wiring) => {
      // A generous answer budget and no burst gap: these tests click in quick succession, read
      // refusals from the response itself even on a busy CI machine, and need no lull before decisions.
      const tuning = { ackBudgetMs: 2_000, burstGapMs: 0, ...options.tuning };
      discord = createDiscordIntegration({ env, services, elect: wiring.elect, tuning });
      return [discord];
    },
  });
  if (!discord) throw new Error('the Discord integration was not created');
  const { apiKey } = await twokey.createAgent('argus', { owners: [`discord:user:${OWNER}`] });
  const clock = options.clock ?? (() => new Date());
  return {
    twokey,
    fake,
    discord,
    signer,
    apiKey,
    async interact(payload, interactOptions = {}) {
      const body = JSON.stringify(payload);
      const timestamp = interactOptions.timestamp ?? Math.floor(clock().getTime() / 1000);
      const response = await twokey.app.inject({ method: 'POST', url: '/discord/interactions', headers: signer.headers(body, timestamp), payload: body });
      return { status: response.statusCode, body: response.body ? JSON.parse(response.body) : null };
    },
    async propose(operation, params) {
      const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation, params } });
      if (response.status !== 201) throw new Error(`propose failed: ${response.status} ${JSON.stringify(response.body)}`);
      return { id: response.body.id as string, confirmToken: response.body.confirmToken as string };
    },
    async close() {
      await twokey.close();
      await fake.close();
    },
  };
}
