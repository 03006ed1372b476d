import { randomBytes, randomUUID } from 'node:crypto';
import { vi } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import type { StoredClick } from '../../src/outbox/inbox.js';
import { createTeamsIntegration, type TeamsIntegration, type TeamsTuning } from '../../src/teams/index.js';
import type { Driver } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { startFakeTeams, type FakeTeams } from './fake-teams.js';

export const APP_ID = '0b7c6a51-3f2e-4d8a-9c1b-5e6f7a8b9c0d';
export const TENANT_ID = '72f988bf-86f1-41af-91ab-2d7cd011db47';
/** Not shaped like any known secret, so only twokey's own care keeps it out of logs. */
export const APP_PASSWORD = `teams-app-password-${randomBytes(12).toString('hex')}`;
export const CONVERSATION = '19:a1b2c3d4e5f60718293a4b5c6d7e8f90@thread.tacv2';

/** Entra object ids (what Teams sends as `from.aadObjectId`). */
export const ALICE = '11111111-aaaa-4aaa-8aaa-000000000001';
export const BOB = '11111111-aaaa-4aaa-8aaa-000000000002';
export const OWNER = '11111111-aaaa-4aaa-8aaa-000000000003';
export const MALLORY = '11111111-aaaa-4aaa-8aaa-000000000004';

export function eventually<T>(check: () => T | Promise<T>, options: { timeout?: number } = {}): Promise<T> {
  return vi.waitFor(check, { timeout: options.timeout ?? 10_000, interval: 20 });
}

/** An `adaptiveCard/action` invoke as the Teams channel sends it for an Action.Execute button. */
export function cardAction(
  verb: string,
  data: Record<string, unknown>,
  clicker: { aadObjectId?: string; name?: string },
  fake: Pick<FakeTeams, 'serviceUrl'>,
  overrides: { id?: string; serviceUrl?: string } = {},
) {
  return {
    name: 'adaptiveCard/action',
    type: 'invoke',
    timestamp: new Date().toISOString(),
    id: overrides.id ?? `f:${randomBytes(8).readBigUInt64BE()}`,
    channelId: 'msteams',
    serviceUrl: overrides.serviceUrl ?? fake.serviceUrl,
    from: {
      id: `29:1${randomBytes(20).toString('base64url')}`,
      name: clicker.name ?? 'Someone',
      ...(clicker.aadObjectId ? { aadObjectId: clicker.aadObjectId } : {}),
    },
    conversation: { isGroup: true, conversationType: 'channel', tenantId: TENANT_ID, id: `${CONVERSATION};messageid=1700000000000` },
    recipient: { id: `28:${APP_ID}`, name: 'twokey' },
    entities: [{ type: 'clientInfo', locale: 'en-US', country: 'US', platform: 'Web', timezone: 'Europe/London' }],
    channelData: { tenant: { id: TENANT_ID }, source: { name: 'message' }, channel: { id: CONVERSATION } },
    replyToId: '1700000000000',
    value: { action: { type: 'Action.Execute', title: 'Button', verb, data, id: randomUUID() }, trigger: 'manual' },
    locale: 'en-US',
  };
}

export interface TeamsTwokey {
  twokey: TestTwokey;
  fake: FakeTeams;
  teams: TeamsIntegration;
  apiKey: string;
  /** Every click the integration handed the inbox. */
  stored: StoredClick[];
  /** POSTs an activity to /teams/messages with the given Authorization (a channel-signed token by default). */
  post(activity: unknown, options?: { authorization?: string | null; rawBody?: string }): Promise<{ status: number; body: any }>;
  /** Clicks a card button as `aadObjectId`, signed by the channel. */
  click(verb: string, data: Record<string, unknown>, aadObjectId: string | undefined): Promise<{ status: number; body: any }>;
  propose(operation: string, params: Record<string, unknown>): Promise<{ id: string }>;
  /** Waits for the proposal's card to be posted; returns its activity. */
  cardOf(proposalId: string): Promise<{ id: string; body: any; edits: number }>;
  close(): Promise<void>;
}

export async function startTeamsTwokey(options: {
  driver: Driver;
  configYaml: string;
  executorFor?: (operation: string) => Executor;
  env?: Record<string, string>;
  tuning?: Partial<TeamsTuning>;
  owners?: string[];
  clock?: () => Date;
  outboxPollMs?: number;
}): Promise<TeamsTwokey> {
  const fake = await startFakeTeams({ appId: APP_ID, appPassword: APP_PASSWORD, tenantId: TENANT_ID });
  const stored: StoredClick[] = [];
  let teams: TeamsIntegration | undefined;
  const twokey = await startTestTwokey({
    driver: options.driver,
    configYaml: options.configYaml,
    chatPayloads: () => fake.calls.map((call) => call.body),
    executorFor: options.executorFor,
    clock: options.clock,
    outboxPollMs: options.outboxPollMs,
    env: {
      TEAMS_APP_ID: APP_ID,
      TEAMS_APP_PASSWORD: APP_PASSWORD,
      TEAMS_TENANT_ID: TENANT_ID,
      TEAMS_SERVICE_URL: fake.serviceUrl,
      TEAMS_TOKEN_URL: fake.tokenUrl,
      TEAMS_OPENID_METADATA_URL: fake.openIdMetadataUrl,
      ...options.env,
    },
    integrations: (services, env) => {
      const inbox = {
        ...services.inbox,
        store: (click: StoredClick) => {
          stored.push(click);
          return services.inbox.store(click);
        },
      };
      // A generous answer budget: the outcome is the invoke's answer even on a loaded two-core machine.
      teams = createTeamsIntegration({ env, services: { ...services, inbox }, tuning: { answerBudgetMs: 20_000, ...options.tuning } });
      return [teams];
    },
  });
  if (!teams) throw new Error('the Teams integration was not created');
  const { apiKey } = await twokey.createAgent('argus', { owners: options.owners ?? [`teams:${OWNER}`] });

  async function post(activity: unknown, postOptions: { authorization?: string | null; rawBody?: string } = {}) {
    const authorization = postOptions.authorization === undefined ? `Bearer ${await fake.sign()}` : postOptions.authorization;
    const response = await twokey.app.inject({
      method: 'POST',
      url: '/teams/messages',
      headers: { 'content-type': 'application/json', ...(authorization === null ? {} : { authorization }) },
      payload: postOptions.rawBody ?? JSON.stringify(activity),
    });
    return { status: response.statusCode, body: response.body ? JSON.parse(response.body) : null };
  }

  return {
    twokey,
    fake,
    teams,
    apiKey,
    stored,
    post,
    click: (verb, data, aadObjectId) => post(cardAction(verb, data, { aadObjectId }, fake)),
    async propose(operation, params) {
      const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation, params } });
      if (response.status !== 201) throw new Error(`propose failed: ${response.status} ${JSON.stringify(response.body)}`);
      return { id: response.body.id as string };
    },
    cardOf(proposalId) {
      return eventually(() => {
        const found = [...fake.activities.values()].find((activity) => JSON.stringify(activity.body).includes(proposalId) && !activity.body.replyToId);
        if (!found) throw new Error(`no card for ${proposalId} yet`);
        return found;
      });
    },
    async close() {
      await twokey.close();
      await fake.close();
    },
  };
}

/** The card's Adaptive Card content of a posted or replaced activity. */
export const cardContent = (activity: { body: any }): any => activity.body.attachments[0].content;

/** Every `Action.Execute` on a card, its nested show-cards included. */
export function executeActions(card: any): any[] {
  const found: any[] = [];
  const visit = (actions: any[] | undefined) => {
    for (const action of actions ?? []) {
      if (action.type === 'Action.Execute') found.push(action);
      if (action.type === 'Action.ShowCard') visit(action.card?.actions);
    }
  };
  visit(card.actions);
  return found;
}
