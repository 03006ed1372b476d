import type { ChatIntegration } from '../../../src/chat/types.js';
import { createSlackIntegration } from '../../../src/slack/index.js';
import { startTestTwokey, type TestTwokey, type TestTwokeyOptions } from '../../support/twokey.js';
import { startFakeSlack, type FakeSlack } from './fake-slack.js';
import { BOT_TOKEN, SIGNING_SECRET, slackPoster, type SlackPoster } from './slack-requests.js';

export interface SlackTwokey extends TestTwokey {
  fake: FakeSlack;
  slack: ChatIntegration;
  /** Signs and posts to /slack/events as Slack would, timestamped by twokey's clock. */
  post: SlackPoster;
  /** The suite's agent. */
  apiKey: string;
  /** Closes twokey, then the fake Slack. */
  close(): Promise<void>;
}

/**
 * A real twokey with the Slack integration over HTTP, pointed at a fresh fake Slack, and an agent
 * to propose with. Everything the fake received is scanned for secrets at close, like the logs.
 */
export async function startSlackTwokey(
  options: Omit<TestTwokeyOptions, 'integrations' | 'chatPayloads'> & { agent?: { name: string; owners?: string[] } },
): Promise<SlackTwokey> {
  const { agent = { name: 'argus' }, ...twokeyOptions } = options;
  const fake = await startFakeSlack();
  let slack: ChatIntegration | undefined;
  let twokey: TestTwokey;
  try {
    twokey = await startTestTwokey({
      ...twokeyOptions,
      chatPayloads: () => [...fake.calls.map((call) => call.args), ...fake.socketMessages],
      env: { SLACK_BOT_TOKEN: BOT_TOKEN, SLACK_SIGNING_SECRET: SIGNING_SECRET, SLACK_API_URL: fake.url, ...twokeyOptions.env },
      integrations: (services, env, wiring) => {
        slack = createSlackIntegration({ env, services, clickConcurrency: wiring.concurrency.slackClicks });
        return [slack];
      },
    });
  } catch (error) {
    await fake.close();
    throw error;
  }
  if (!slack) throw new Error('the Slack integration was not created');
  const { apiKey } = await twokey.createAgent(agent.name, agent.owners ? { owners: agent.owners } : {});
  const closeTwokey = twokey.close;
  return Object.assign(twokey, {
    fake,
    slack,
    post: slackPoster(twokey.app, twokey.services.clock),
    apiKey,
    async close() {
      try {
        await closeTwokey();
      } finally {
        await fake.close();
      }
    },
  });
}
