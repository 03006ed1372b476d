import { Routes } from 'discord.js';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ChatIntegration, ChatPublisher } from '../chat/types.js';
import type { ChatPlatformContext } from '../chat/platform-module.js';
import type { Env } from '../config/env.js';
import { isTwokeyError } from '../core/errors.js';
import { createDiscordGateway, type DiscordGateway } from './gateway.js';
import { registerInteractionRoute } from './http-route.js';
import { createInteractionHandler, type InteractionReply } from './interactions.js';
import type { DiscordServices, LeaderElector } from './ports.js';
import { DISCORD_CLICK_JOB } from './platform.js';
import { createDiscordPublisher } from './publisher.js';
import { createDiscordRest, describeRestFailure, withDeadline } from './rest.js';
import { discordPublicKey } from './signature.js';
import { silentLogger } from '../chat/silent-logger.js';

export { createDiscordPublisher } from './publisher.js';
export { renderMessage } from './message.js';
export { checkDiscordSignature, discordPublicKey } from './signature.js';

export type DiscordEnv = Pick<Env, 'DISCORD_BOT_TOKEN' | 'DISCORD_PUBLIC_KEY' | 'DISCORD_GATEWAY' | 'DISCORD_API_URL' | 'DATABASE_URL'>;

export interface DiscordIntegrationOptions {
  env: DiscordEnv;
  /** What a click needs. */
  services: DiscordServices;
  /** Defaults to a child of the HTTP app's logger, taken when the routes are registered. */
  logger?: FastifyBaseLogger;
  /**
   * The fleet's leader election, so one replica holds the gateway connection (`DISCORD_GATEWAY`):
   * an advisory lock on PostgreSQL, always this process on the embedded database.
   */
  elect?: LeaderElector;
  tuning?: Partial<DiscordTuning>;
}

export interface DiscordTuning {
  /** Whole publisher call, rate-limit waits included. */
  deliveryDeadlineMs: number;
  /** Longest 429 wait done in place; longer ones become DeliveryError.retryAfterMs. */
  maxRateLimitWaitMs: number;
  /** One HTTP attempt. */
  requestTimeoutMs: number;
  /** Standby replicas try the gateway lock this often. */
  gatewayRetryMs: number;
  /**
   * Longest the checks before a lone click's response may take. They take a few milliseconds when
   * twokey is idle; past this, or in a burst of clicks, it answers at once instead (a deferred update,
   * or the reject modal unchecked) and sends any refusal as an ephemeral follow-up. Discord's limit is 3 s.
   */
  ackBudgetMs: number;
  /** A click arriving within this long of the previous one is part of a burst and is answered at once. */
  burstGapMs: number;
  /** How long `stop()` waits for the clicks this process stored to be decided. */
  drainTimeoutMs: number;
}

const defaultTuning: DiscordTuning = {
  deliveryDeadlineMs: 30_000,
  maxRateLimitWaitMs: 10_000,
  requestTimeoutMs: 10_000,
  gatewayRetryMs: 5_000,
  ackBudgetMs: 50,
  burstGapMs: 250,
  drainTimeoutMs: 15_000,
};

export interface DiscordIntegration extends ChatIntegration {
  publisher: ChatPublisher;
  registerRoutes(app: FastifyInstance): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves once the clicks this process stored (and acknowledged to Discord) have been decided. */
  settle(): Promise<void>;
  /** Null unless DISCORD_GATEWAY is true. */
  gateway: DiscordGateway | null;
}

const idAndToken = (payload: unknown): { id: string; token: string } | null => {
  if (typeof payload !== 'object' || payload === null) return null;
  const { id, token } = payload as { id?: unknown; token?: unknown };
  return typeof id === 'string' && typeof token === 'string' ? { id, token } : null;
};

/** The registry's entry point (src/runtime/integrations.ts): Discord as the environment configures it. */
export function create({ env, services, logger, wiring }: ChatPlatformContext<DiscordServices>): ChatIntegration {
  return createDiscordIntegration({ env, services, logger, elect: wiring.elect });
}

/**
 * Discord as an approval channel: posts and edits proposal messages (embed + buttons) and takes
 * Approve / Reject / Retry clicks over HTTP interactions (DISCORD_PUBLIC_KEY) and/or the gateway
 * (DISCORD_GATEWAY=true). Needs DISCORD_BOT_TOKEN.
 */
export function createDiscordIntegration(options: DiscordIntegrationOptions): DiscordIntegration {
  const { env, services } = options;
  const botToken = env.DISCORD_BOT_TOKEN;
  if (!botToken) throw new Error('DISCORD_BOT_TOKEN is required for the Discord integration');
  const tuning: DiscordTuning = { ...defaultTuning, ...options.tuning };
  let logger: FastifyBaseLogger | undefined = options.logger?.child({ platform: 'discord' });
  const log = () => logger ?? silentLogger;

  const rest = createDiscordRest({
    apiUrl: env.DISCORD_API_URL,
    botToken,
    maxRateLimitWaitMs: tuning.maxRateLimitWaitMs,
    requestTimeoutMs: tuning.requestTimeoutMs,
    logger: log,
  });
  const publisher = createDiscordPublisher({ rest, deadlineMs: tuning.deliveryDeadlineMs });
  const handler = createInteractionHandler({
    services,
    rest,
    logger: log,
    botToken,
    ackBudgetMs: tuning.ackBudgetMs,
    burstGapMs: tuning.burstGapMs,
  });

  /** Gateway interactions are answered through the REST callback; the work after it is the same as over HTTP. */
  async function onGatewayInteraction(payload: unknown): Promise<void> {
    const target = idAndToken(payload);
    let answer: InteractionReply | null;
    try {
      answer = await handler.handle(payload);
    } catch (error) {
      // A payload no Discord client sends: over HTTP a 400; here there is nobody to answer.
      if (!isTwokeyError(error)) throw error;
      log().warn({ code: error.code, problem: error.message }, 'Discord gateway interaction refused');
      return;
    }
    if (!answer || !target) return;
    try {
      await withDeadline(5_000, (signal) => rest.post(Routes.interactionCallback(target.id, target.token), { body: answer.response, auth: false, signal }));
    } catch (error) {
      // Unanswered, Discord shows the clicker "interaction failed"; deciding anyway would surprise
      // them, so the stored click is taken back (unless another replica's outbox started it already).
      const withdrawn = await handler.withdraw(answer).catch(() => false);
      log().warn({ interactionId: target.id, withdrawn, ...describeRestFailure(error) }, 'Discord interaction callback failed');
      return;
    }
    handler.afterAnswer(answer);
  }

  const { elect } = options;
  if (env.DISCORD_GATEWAY && !elect) throw new Error('DISCORD_GATEWAY needs the leader election the runtime hands in (`elect`)');
  const gateway =
    env.DISCORD_GATEWAY && elect
      ? createDiscordGateway({
          apiUrl: env.DISCORD_API_URL,
          botToken,
          elect,
          retryMs: tuning.gatewayRetryMs,
          logger: log,
          onInteraction: (payload) => {
            onGatewayInteraction(payload).catch((error: unknown) => log().error({ err: error }, 'Discord gateway interaction failed'));
          },
        })
      : null;

  return {
    publisher,
    gateway,
    jobHandlers: { [DISCORD_CLICK_JOB]: services.inbox.guard(handler.decideClick) },

    async registerRoutes(app) {
      logger ??= app.log.child({ platform: 'discord' });
      if (env.DISCORD_PUBLIC_KEY) {
        await registerInteractionRoute(app, { publicKey: discordPublicKey(env.DISCORD_PUBLIC_KEY), clock: services.clock, handler });
      }
    },

    async start() {
      if (!env.DISCORD_PUBLIC_KEY && !gateway) {
        log().warn('Discord: neither DISCORD_PUBLIC_KEY nor DISCORD_GATEWAY=true is set, so messages are posted but clicks never arrive');
      }
      // In the background: twokey serves its API even while Discord is unreachable.
      gateway?.start();
    },

    settle: () => services.inbox.settle(DISCORD_CLICK_JOB),

    async stop() {
      await gateway?.stop();
      // Clicks stored and acknowledged are safe in the database; deciding them before going saves
      // the approvers a wait for the next process. The outbox still runs until the server closes.
      await services.inbox
        .settle(DISCORD_CLICK_JOB, tuning.drainTimeoutMs)
        .catch((error: unknown) => log().warn({ err: error }, 'could not wait for stored Discord clicks'));
    },
  };
}
