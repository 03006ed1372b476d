import type { Database } from '../db/database.js';

/** How much work each chat platform runs at once after acknowledging clicks; set per database. */
export interface ChatConcurrency {
  /** Slack clicks decided at once after their acks. */
  slackClicks: number;
  /** Discord decisions run at once after their responses. */
  discordDecisions: number;
}

/**
 * The embedded database runs every query on this event loop, one at a time: decisions at once only
 * queue their queries in front of the next click's checks, so few run (for Discord, whose answer is
 * held for its checks, one). PostgreSQL works in its own process and takes more (measured with
 * `npm run bench`).
 */
export function chatConcurrencyFor(kind: Database['kind']): ChatConcurrency {
  return kind === 'postgres' ? { slackClicks: 16, discordDecisions: 4 } : { slackClicks: 4, discordDecisions: 1 };
}
