import type { Logger } from 'pino';
import type { ChatIntegration } from '../chat/types.js';
import type { Env } from '../config/env.js';
import type { LeaderElector } from '../discord/ports.js';
import { isSlackConfigured } from '../slack/configured.js';
import type { ChatConcurrency } from './concurrency.js';
import type { Services } from './services.js';

/** What the runtime decides for the chat platforms rather than each platform reading the database. */
export interface ChatWiring {
  concurrency: ChatConcurrency;
  /** The fleet's leader election (Discord's gateway connects on one replica). */
  elect: LeaderElector;
}

/**
 * The chat platforms the environment configures (see .env.example). Each platform's module is
 * imported only when it is configured: Bolt and discord.js are most of what a server would load,
 * and a server with neither, or one, should not spend its start-up compiling them.
 */
export async function chatFromEnvironment(env: Env, services: Services, wiring: ChatWiring, logger: Logger): Promise<ChatIntegration[]> {
  const integrations: ChatIntegration[] = [];
  if (isSlackConfigured(env)) {
    const { createSlackIntegration } = await import('../slack/index.js');
    integrations.push(createSlackIntegration({ env, services, logger, clickConcurrency: wiring.concurrency.slackClicks }));
  }
  if (env.DISCORD_BOT_TOKEN) {
    const { createDiscordIntegration } = await import('../discord/index.js');
    integrations.push(createDiscordIntegration({ env, services, logger, elect: wiring.elect }));
  }
  if (env.TEAMS_APP_ID && env.TEAMS_APP_PASSWORD) {
    const { createTeamsIntegration } = await import('../teams/index.js');
    integrations.push(createTeamsIntegration({ env, services, logger }));
  }
  return integrations;
}
