import type { Database } from '../db/database.js';

import type { ChatConcurrency } from '../chat/platform-module.js';

export type { ChatConcurrency } from '../chat/platform-module.js';

/**
 * The embedded database runs every query on this event loop, one at a time: decisions at once only
 * queue their queries in front of the next clicks' writes, so few run. PostgreSQL works in its own
 * process and takes more (measured with `npm run bench`).
 */
export function chatConcurrencyFor(kind: Database['kind']): ChatConcurrency {
  return kind === 'postgres' ? { slackClicks: 16, clickDecisions: 16 } : { slackClicks: 4, clickDecisions: 2 };
}
