/**
 * Everything outside twokey that a benchmark needs, on 127.0.0.1: a fake Slack Web API, a fake
 * Discord REST API and a fake downstream service (the ones the test suites use, speaking the real
 * wire formats), plus a clock of when each proposal reached each of them.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { startFakeDiscord, type FakeDiscord } from '../../test/discord/fake-discord.js';
import { ALICE, APPLICATION_ID, BOT_TOKEN, CHANNEL, buttonPress, makeSigner, modalSubmit } from '../../test/discord/helpers.js';
import { startFakeSlack, type FakeSlack } from '../../test/slack/support/fake-slack.js';
import { buttonClick, interactionBody, rejectSubmission, slackHeaders } from '../../test/slack/support/slack-requests.js';
import { startFakeDownstream, type FakeDownstream } from '../../test/support/fake-downstream.js';

export const SLACK_SIGNING_SECRET = `bench-slack-${randomBytes(12).toString('hex')}`;
export const SLACK_BOT_TOKEN = 'xoxb-bench-0000-benchbottoken';
export const SLACK_CHANNEL = 'C0BENCH';
export const SLACK_APPROVER = 'U0ALICE';
export const EXECUTOR_SECRET = `bench-executor-${randomBytes(12).toString('hex')}`;

/** One event per key, remembered until someone waits for it (arrivals often beat the waiter). */
export class Arrivals {
  private readonly arrived = new Map<string, number>();
  private readonly waiting = new Map<string, (at: number) => void>();

  arrive(key: string): void {
    const at = performance.now();
    const waiter = this.waiting.get(key);
    if (!waiter) return void this.arrived.set(key, at);
    this.waiting.delete(key);
    waiter(at);
  }

  /** Resolves with performance.now() at the moment the event arrived. */
  wait(key: string, timeoutMs = 60_000): Promise<number> {
    const at = this.arrived.get(key);
    if (at !== undefined) {
      this.arrived.delete(key);
      return Promise.resolve(at);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(key);
        reject(new Error(`nothing arrived for ${key} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(key, (arrivedAt) => {
        clearTimeout(timer);
        resolve(arrivedAt);
      });
    });
  }

  count(prefix: string): number {
    return [...this.arrived.keys()].filter((key) => key.startsWith(prefix)).length;
  }

  /** Forgets arrivals nobody waited for (bulk phases), so a long run does not hoard them. */
  clear(): void {
    this.arrived.clear();
  }
}

export interface World {
  slack: FakeSlack;
  discord: FakeDiscord;
  downstream: FakeDownstream;
  arrivals: Arrivals;
  /** Environment a twokey needs to talk to this world. */
  env: Record<string, string>;
  configYaml: string;
  /** An approver's Approve click; resolves with the time to the answer. */
  slackClick(baseUrl: string, proposalId: string): Promise<number>;
  discordClick(baseUrl: string, proposalId: string): Promise<number>;
  /** An approver submitting the Reject form with a reason. */
  slackReject(baseUrl: string, proposalId: string): Promise<number>;
  discordReject(baseUrl: string, proposalId: string): Promise<number>;
  /**
   * The same click with a wrong signature, which twokey refuses (401) after reading and checking
   * it: the floor of a click's answer on this machine (connection, body, signature), with none of
   * twokey's own work.
   */
  forgedClick(baseUrl: string, chat: 'slack' | 'discord', proposalId: string): Promise<number>;
  /**
   * Drops what the fakes recorded; a long run would otherwise keep every call in memory. Discord's
   * stored messages stay: twokey edits them after the click.
   */
  forget(): void;
  close(): Promise<void>;
}

function slackProposalId(blocks: unknown): string | undefined {
  for (const block of Array.isArray(blocks) ? (blocks as Array<{ elements?: Array<{ action_id?: string; value?: string }> }>) : []) {
    const approve = block.elements?.find((element) => element.action_id === 'twokey_approve');
    if (approve?.value) return approve.value;
  }
  return undefined;
}

/** Times one request from send to answer; any other status than expected fails the benchmark. */
async function timedPost(url: string, headers: Record<string, string>, body: string, expectedStatus = 200): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, { method: 'POST', headers, body });
  await response.arrayBuffer();
  const elapsed = performance.now() - started;
  if (response.status !== expectedStatus) throw new Error(`${url} answered ${response.status}`);
  return elapsed;
}

export async function startWorld(): Promise<World> {
  const arrivals = new Arrivals();
  const slack = await startFakeSlack();
  slack.respond((call) => {
    if (call.method === 'chat.postMessage') {
      const id = slackProposalId(call.args.blocks);
      if (id) arrivals.arrive(`slack:${id}`);
    }
    return undefined;
  });
  const discord = await startFakeDiscord({
    applicationId: APPLICATION_ID,
    onCall: (call) => {
      if (call.method !== 'POST' || !/^\/channels\/\d+\/messages$/.test(call.path)) return;
      const customId = JSON.stringify(call.body?.components ?? []).match(/twokey:approve:([^"]+)/)?.[1];
      if (customId) arrivals.arrive(`discord:${customId}`);
    },
  });
  const downstream = await startFakeDownstream(EXECUTOR_SECRET, {
    onRequest: (request) => {
      if (request.idempotencyKey) arrivals.arrive(`executed:${request.idempotencyKey}`);
    },
  });
  const signer = makeSigner();
  const forger = makeSigner();
  const postToSlack = (baseUrl: string, payload: unknown, secret = SLACK_SIGNING_SECRET) => {
    const body = interactionBody(payload);
    const headers = { 'content-type': 'application/x-www-form-urlencoded', ...slackHeaders(body, Math.floor(Date.now() / 1000), secret) };
    return timedPost(`${baseUrl}/slack/events`, headers, body, secret === SLACK_SIGNING_SECRET ? 200 : 401);
  };
  const postToDiscord = (baseUrl: string, payload: unknown, by = signer) => {
    const body = JSON.stringify(payload);
    return timedPost(`${baseUrl}/discord/interactions`, by.headers(body, Math.floor(Date.now() / 1000)), body, by === signer ? 200 : 401);
  };
  const slackApprove = (proposalId: string) => buttonClick({ actionId: 'twokey_approve', proposalId, userId: SLACK_APPROVER, channel: SLACK_CHANNEL });
  const discordApprove = (proposalId: string) => buttonPress(`twokey:approve:${proposalId}`, { userId: ALICE });

  const executor = `{ type: http, url: "${downstream.url}/apply", secret: "\${BENCH_EXECUTOR_SECRET}", timeout: 10s }`;
  const configYaml = `
operations:
  - name: bench_slack
    description: A benchmark step approved in Slack
    params: { type: object, required: [n], properties: { n: { type: integer } } }
    summary: "{{ agent }} runs benchmark step {{ params.n }}."
    expiresIn: 1h
    approval: { approvers: [slack:${SLACK_APPROVER}], slack: { channel: ${SLACK_CHANNEL} } }
    commit: on_approve
    executor: ${executor}
  - name: bench_discord
    description: A benchmark step approved in Discord
    params: { type: object, required: [n], properties: { n: { type: integer } } }
    summary: "{{ agent }} runs benchmark step {{ params.n }}."
    expiresIn: 1h
    approval: { approvers: ["discord:user:${ALICE}"], discord: { channel: "${CHANNEL}" } }
    commit: on_approve
    executor: ${executor}
  - name: bench_core
    description: The core cycle, no chat - approved through the CLI path, committed by the agent
    params: { type: object, required: [n], properties: { n: { type: integer } } }
    summary: "{{ agent }} runs core step {{ params.n }}."
    expiresIn: 1h
    approval: { approvers: [web:bench] }
    commit: agent
    executor: { type: echo }
`;

  return {
    slack,
    discord,
    downstream,
    arrivals,
    configYaml,
    env: {
      SLACK_BOT_TOKEN,
      SLACK_SIGNING_SECRET,
      SLACK_API_URL: slack.url,
      DISCORD_BOT_TOKEN: BOT_TOKEN,
      DISCORD_APPLICATION_ID: APPLICATION_ID,
      DISCORD_PUBLIC_KEY: signer.publicKeyHex,
      DISCORD_API_URL: discord.apiUrl,
      BENCH_EXECUTOR_SECRET: EXECUTOR_SECRET,
    },
    slackClick: (baseUrl, proposalId) => postToSlack(baseUrl, slackApprove(proposalId)),
    slackReject: (baseUrl, proposalId) => postToSlack(baseUrl, rejectSubmission({ proposalId, userId: SLACK_APPROVER, reason: 'not now' })),
    discordClick: (baseUrl, proposalId) => postToDiscord(baseUrl, discordApprove(proposalId)),
    discordReject: (baseUrl, proposalId) => postToDiscord(baseUrl, modalSubmit(`twokey:reject:${proposalId}`, { userId: ALICE }, 'not now')),
    forgedClick: (baseUrl, chat, proposalId) =>
      chat === 'slack'
        ? postToSlack(baseUrl, slackApprove(proposalId), `${SLACK_SIGNING_SECRET}-forged`)
        : postToDiscord(baseUrl, discordApprove(proposalId), forger),
    forget() {
      slack.calls.length = 0;
      discord.calls.length = 0;
      downstream.requests.length = 0;
      downstream.effects.clear();
      arrivals.clear();
    },
    async close() {
      await Promise.all([slack.close(), discord.close(), downstream.close()]);
    },
  };
}
