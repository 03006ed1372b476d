import { App, SocketModeReceiver, webApi, type Receiver } from '@slack/bolt';
import type { FastifyInstance } from 'fastify';
import type { ChatIntegration } from '../chat/types.js';
import type { ChatPlatformContext } from '../chat/platform-module.js';
import type { Env } from '../config/env.js';
import { registerSlackApprover } from './approver.js';
import { FastifySlackReceiver } from './fastify-receiver.js';
import { boltLogger, type SlackLog } from './log.js';
import { createSlackPublisher } from './publisher.js';
import { createUsergroupDirectory } from './usergroups.js';
import { createWorkQueue } from '../lib/work-queue.js';
import { settleWithin } from '../lib/timeouts.js';
import { undiciFetch } from '../lib/undici-fetch.js';
import type { SlackServices } from './ports.js';
import { SLACK_CLICK_JOB } from './platform.js';

export { renderProposalMessage } from './blocks.js';
export { verifySlackSignature } from './signature.js';

export type SlackEnv = Pick<Env, 'SLACK_BOT_TOKEN' | 'SLACK_SIGNING_SECRET' | 'SLACK_APP_TOKEN' | 'SLACK_API_URL'>;

export type { SlackServices } from './ports.js';

export interface SlackIntegrationOptions {
  env: SlackEnv;
  services: SlackServices;
  /** twokey's logger; when absent, the fastify server's logger is adopted in `registerRoutes`. */
  logger?: SlackLog;
  /** Socket Mode tuning (tests shorten the reconnect delay, which Slack's client ties to the ping timeout). */
  socketMode?: { clientPingTimeoutMs?: number; serverPingTimeoutMs?: number };
  /** How long `start()` waits for the first Socket Mode connection before going on without it. */
  connectTimeoutMs?: number;
  /** How long `stop()` waits for the clicks this process stored to be decided. */
  drainTimeoutMs?: number;
  /**
   * How many form openers (Reject, Approve for…) run at once after their acks (default 4). The
   * runtime sets it from the database: their checks on the embedded one are CPU work on this event loop.
   */
  clickConcurrency?: number;
}

// Apart, so the runtime can ask without loading Bolt.
export { isSlackConfigured } from './platform.js';

/** The registry's entry point (src/runtime/integrations.ts): Slack as the environment configures it. */
export function create({ env, services, logger, wiring }: ChatPlatformContext<SlackServices>): ChatIntegration {
  return createSlackIntegration({ env, services, logger, clickConcurrency: wiring.concurrency.slackClicks });
}

/** Until a logger is known (registerRoutes), lines are dropped rather than printed unscrubbed. */
const silent: SlackLog = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

/**
 * Slack as a twokey chat platform (docs/slack.md): posts and edits the proposal messages, and receives
 * Approve / Reject / Retry clicks, over HTTP at `POST /slack/events` or, with SLACK_APP_TOKEN, over
 * Socket Mode. Bolt runs with an `authorize` that hands it the bot token, so it calls no `auth.test`
 * at construction and twokey starts even while Slack is unreachable.
 */
export function createSlackIntegration(options: SlackIntegrationOptions): ChatIntegration {
  const { env, services } = options;
  const botToken = env.SLACK_BOT_TOKEN;
  if (!botToken) throw new Error('SLACK_BOT_TOKEN is required for the Slack integration');
  const socketMode = Boolean(env.SLACK_APP_TOKEN);
  if (!socketMode && !env.SLACK_SIGNING_SECRET) throw new Error('SLACK_SIGNING_SECRET is required for Slack over HTTP');

  let log: SlackLog = options.logger ?? silent;
  const currentLog = () => log;
  const sdkLogger = boltLogger(currentLog);

  // No retries inside the client: the outbox retries deliveries, and a click's ephemeral is not worth
  // a queue. Rate-limited calls fail at once with Retry-After instead of sleeping in the client. Calls
  // go out through undici's request rather than the global fetch (see undiciFetch: its CPU cost).
  const clientOptions = () => ({
    slackApiUrl: env.SLACK_API_URL,
    fetch: undiciFetch,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: 10_000,
    logger: sdkLogger,
  });
  const client = new webApi.WebClient(botToken, clientOptions());

  // Acks go out before the forms they open: see createWorkQueue. Decisions are stored, and the outbox runs them.
  const afterAck = createWorkQueue({ concurrency: options.clickConcurrency ?? 4 });

  let httpReceiver: FastifySlackReceiver | null = null;
  let receiver: Receiver;
  if (socketMode) {
    receiver = new SocketModeReceiver({
      appToken: env.SLACK_APP_TOKEN ?? '',
      logger: sdkLogger,
      ...(options.socketMode?.clientPingTimeoutMs !== undefined ? { clientPingTimeout: options.socketMode.clientPingTimeoutMs } : {}),
      ...(options.socketMode?.serverPingTimeoutMs !== undefined ? { serverPingTimeout: options.socketMode.serverPingTimeoutMs } : {}),
      // Its own object: the Socket Mode client writes into the options it gets. Unlike the publisher it
      // retries apps.connections.open for as long as Slack is unreachable: once that call gives up on a
      // network error, the client's reconnect loop ends in an unhandled rejection. A revoked token is a
      // platform error, which the client reports at once instead of retrying.
      installerOptions: {
        clientOptions: { ...clientOptions(), retryConfig: { forever: true, factor: 1.5, minTimeout: 1_000, maxTimeout: 30_000, randomize: true } },
      },
    });
  } else {
    httpReceiver = new FastifySlackReceiver({
      signingSecret: env.SLACK_SIGNING_SECRET ?? '',
      clock: services.clock,
      log: currentLog,
      decisionButton: (body) => approver.takeDecisionButton(body),
    });
    receiver = httpReceiver;
  }

  const bolt = new App({
    receiver,
    authorize: async () => ({ botToken }),
    logger: sdkLogger,
    clientOptions: clientOptions(),
    // twokey keeps no conversation state; Bolt's in-memory store would only grow.
    convoStore: false,
  });
  bolt.error(async (error) => {
    // Listeners catch their own failures; this only sees Bolt's (authorisation, routing).
    log.error({ code: error.code, message: error.message }, 'Slack event failed in Bolt');
  });

  const approver = registerSlackApprover(bolt, {
    proposals: services.proposals,
    ...(services.grants ? { grants: services.grants } : {}),
    store: services.store,
    operation: (name) => services.operation(name),
    operations: () => services.operations(),
    client,
    usergroups: createUsergroupDirectory({ client }),
    log: currentLog,
    inbox: services.inbox,
    afterAck: (task) => afterAck.run(task),
    clock: services.clock,
  });

  let started: Promise<unknown> | null = null;

  return {
    publisher: createSlackPublisher(client),
    jobHandlers: { [SLACK_CLICK_JOB]: services.inbox.guard(approver.decideClick) },

    async registerRoutes(app: FastifyInstance) {
      if (!options.logger) log = app.log;
      if (httpReceiver) await httpReceiver.register(app);
    },

    async start() {
      if (!socketMode) return;
      started = bolt.start();
      const connected = await settleWithin(started, options.connectTimeoutMs ?? 10_000, { unref: true });
      if (connected.settled) {
        log.info('Slack Socket Mode connected');
      } else {
        // Slack unreachable at start: serve the rest of twokey and keep connecting in the background.
        log.warn('Slack Socket Mode not connected yet; still trying');
        started.then(
          () => log.info('Slack Socket Mode connected'),
          (error: unknown) => log.error({ message: error instanceof Error ? error.message : 'unknown' }, 'Slack Socket Mode gave up connecting'),
        );
      }
    },

    async stop() {
      if (socketMode && started) await bolt.stop().catch(() => undefined);
      const drainTimeoutMs = options.drainTimeoutMs ?? 15_000;
      await afterAck.drain(drainTimeoutMs);
      // Clicks stored and acknowledged are safe in the database; deciding them before going saves
      // the approvers a wait for the next process. The outbox still runs until the server closes.
      await services.inbox
        .settle(SLACK_CLICK_JOB, drainTimeoutMs)
        .catch((error: unknown) => log.warn({ err: error }, 'could not wait for stored Slack clicks'));
    },
  };
}
