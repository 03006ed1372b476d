import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ChatIntegration } from '../chat/types.js';
import type { Env } from '../config/env.js';
import type { ChatPlatformContext } from '../chat/platform-module.js';
import { TEAMS_CLICK_JOB } from './platform.js';
import { createTeamsAuth } from './auth.js';
import { createBotConnector, tokenUrlFor } from './connector.js';
import { registerTeamsRoute } from './http-route.js';
import { createInvokeHandler } from './invoke.js';
import type { TeamsServices } from './ports.js';
import { createTeamsPublisher } from './publisher.js';
import { silentLogger } from '../chat/silent-logger.js';

export { cardToAdaptiveCard, followUpToTeams, renderActivity } from './adaptive-card.js';
export { TEAMS_MESSAGES_PATH } from './http-route.js';
export type { TeamsServices } from './ports.js';

export type TeamsEnv = Pick<
  Env,
  'TEAMS_APP_ID' | 'TEAMS_APP_PASSWORD' | 'TEAMS_TENANT_ID' | 'TEAMS_SERVICE_URL' | 'TEAMS_TOKEN_URL' | 'TEAMS_OPENID_METADATA_URL'
>;

export interface TeamsTuning {
  /** One HTTP attempt to the Bot Connector or the token endpoint. */
  requestTimeoutMs: number;
  /** How long a click's invoke waits for its decision before answering that it is recorded. */
  answerBudgetMs: number;
  /** How long `stop()` waits for the clicks this process stored to be decided. */
  drainTimeoutMs: number;
}

const defaultTuning: TeamsTuning = { requestTimeoutMs: 10_000, answerBudgetMs: 3_000, drainTimeoutMs: 15_000 };

export interface TeamsIntegrationOptions {
  env: TeamsEnv;
  services: TeamsServices;
  /** Defaults to a child of the HTTP app's logger, taken when the routes are registered. */
  logger?: FastifyBaseLogger;
  tuning?: Partial<TeamsTuning>;
}

export interface TeamsIntegration extends ChatIntegration {
  registerRoutes(app: FastifyInstance): Promise<void>;
  stop(): Promise<void>;
  /** Resolves once the clicks this process stored have been decided. */
  settle(): Promise<void>;
}

/** The registry's entry point (src/runtime/integrations.ts): Teams as the environment configures it. */
export function create({ env, services, logger }: ChatPlatformContext<TeamsServices>): ChatIntegration {
  return createTeamsIntegration({ env, services, logger });
}

/**
 * Microsoft Teams as an approval channel: proposal cards (Adaptive Cards) posted to a conversation
 * through the Bot Connector and replaced in place as the proposal moves on; Approve, Approve for…,
 * Reject (with a reason typed on the card) and Retry as `Action.Execute` buttons, received on
 * `POST /teams/messages`. Needs TEAMS_APP_ID and TEAMS_APP_PASSWORD.
 */
export function createTeamsIntegration(options: TeamsIntegrationOptions): TeamsIntegration {
  const { env, services } = options;
  const appId = env.TEAMS_APP_ID;
  const appPassword = env.TEAMS_APP_PASSWORD;
  if (!appId || !appPassword) throw new Error('TEAMS_APP_ID and TEAMS_APP_PASSWORD are required for the Teams integration');
  const tuning: TeamsTuning = { ...defaultTuning, ...options.tuning };
  let logger: FastifyBaseLogger | undefined = options.logger?.child({ platform: 'teams' });
  const log = () => logger ?? silentLogger;

  const connector = createBotConnector({
    appId,
    appPassword,
    tokenUrl: env.TEAMS_TOKEN_URL ?? tokenUrlFor(env.TEAMS_TENANT_ID),
    now: () => services.clock().getTime(),
    requestTimeoutMs: tuning.requestTimeoutMs,
  });
  const publisher = createTeamsPublisher({ connector, serviceUrl: env.TEAMS_SERVICE_URL });
  const auth = createTeamsAuth({ appId, openIdMetadataUrl: env.TEAMS_OPENID_METADATA_URL, clock: services.clock });
  const handler = createInvokeHandler({ services, logger: log, answerBudgetMs: tuning.answerBudgetMs });

  return {
    publisher,
    jobHandlers: { [TEAMS_CLICK_JOB]: services.inbox.guard(handler.decideClick) },

    async registerRoutes(app) {
      logger ??= app.log.child({ platform: 'teams' });
      await registerTeamsRoute(app, { auth, handler });
    },

    settle: () => services.inbox.settle(TEAMS_CLICK_JOB),

    async stop() {
      // Clicks stored and answered are safe in the database; deciding them before going saves the
      // approvers a wait for the next process.
      await services.inbox
        .settle(TEAMS_CLICK_JOB, tuning.drainTimeoutMs)
        .catch((error: unknown) => log().warn({ err: error }, 'could not wait for stored Teams clicks'));
    },
  };
}
