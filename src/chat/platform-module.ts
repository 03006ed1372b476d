import type { Logger } from 'pino';
import type { Env } from '../config/env.js';
import type { LeaderElector } from './ports.js';
import type { ChatIntegration } from './types.js';

/**
 * What a chat platform's module (`src/<name>/index.ts`) exports. The runtime imports it only when
 * the platform's declaration says the environment configures it (src/runtime/integrations.ts), so
 * its library (Bolt, discord.js) loads only then. How to add a platform: README.md.
 */
export interface ChatPlatformModule<Services = never> {
  create(context: ChatPlatformContext<Services>): ChatIntegration;
}

/** What the runtime hands every platform's `create`. */
export interface ChatPlatformContext<Services> {
  /** The validated environment: the platform reads its own variables (declared in its `platform.ts`). */
  env: Env;
  /** The core's services and the outbox's inbox; each platform names the part it uses in its `ports.ts`. */
  services: Services;
  logger: Logger;
  wiring: ChatWiring;
}

/** What the runtime decides for the chat platforms rather than each platform reading the database. */
export interface ChatWiring {
  concurrency: ChatConcurrency;
  /** The fleet's leader election, for work one replica does (Discord's gateway connection). */
  elect: LeaderElector;
}

/** How much chat work runs at once; set per database (src/runtime/concurrency.ts). */
export interface ChatConcurrency {
  /** Slack form openers (Reject, Approve for…) handled at once after their acks. */
  slackClicks: number;
  /** Stored clicks (every platform's) decided at once per replica: the slots of the outbox's `clicks` lane. */
  clickDecisions: number;
}
