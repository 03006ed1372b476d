import type { Env } from '../config/env.js';

/**
 * True when the environment asks for Slack: a bot token plus a signing secret (HTTP) or an app token
 * (Socket Mode). Kept free of Bolt: the runtime asks it before deciding to load the integration.
 */
export function isSlackConfigured(env: Pick<Env, 'SLACK_BOT_TOKEN' | 'SLACK_SIGNING_SECRET' | 'SLACK_APP_TOKEN'>): boolean {
  return Boolean(env.SLACK_BOT_TOKEN && (env.SLACK_SIGNING_SECRET || env.SLACK_APP_TOKEN));
}
