import type { Logger } from 'pino';
import type { ChatPlatformModule, ChatWiring } from '../chat/platform-module.js';
import type { ChatIntegration } from '../chat/types.js';
import type { Env } from '../config/env.js';
import { chatPlatforms, type RegisteredPlatformName } from '../platforms/index.js';
import type { Services } from './services.js';

export type { ChatWiring } from '../chat/platform-module.js';

/**
 * Each registered platform's module, imported only when that platform is configured: Bolt and
 * discord.js are most of what a server would load, and a server with neither, or one, should not
 * spend its start-up compiling them. Typed by the registry's names, so a platform added to
 * src/platforms/index.ts without its loader here does not compile.
 */
export const platformModules: { readonly [Name in RegisteredPlatformName]: () => Promise<ChatPlatformModule<Services>> } = {
  slack: () => import('../slack/index.js'),
  discord: () => import('../discord/index.js'),
  teams: () => import('../teams/index.js'),
  email: () => import('../email/index.js'),
};

/** The chat platforms the environment configures (see .env.example), in the registry's order. */
export async function chatFromEnvironment(env: Env, services: Services, wiring: ChatWiring, logger: Logger): Promise<ChatIntegration[]> {
  const integrations: ChatIntegration[] = [];
  for (const platform of chatPlatforms) {
    if (!platform.env.isConfigured(env)) continue;
    const { create } = await platformModules[platform.name]();
    integrations.push(create({ env, services, logger, wiring }));
  }
  return integrations;
}
