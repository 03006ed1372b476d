import type { ResultContext } from '../config/summary-template.js';
import { scrubSecrets } from '../lib/secrets.js';

/**
 * What a chat channel sees of an executor's answer. Everyone in the channel reads it, and a
 * business's answer may carry its own tokens (the echo adapter's `confirmationToken`), so it passes
 * the log scrubber first; the full result stays with the agent and in the console.
 */

/** Long enough for a status and an id; the rest is one click away in the console. */
export const CHAT_RESULT_MAX_CHARS = 200;

const shorten = (text: string): string => (text.length <= CHAT_RESULT_MAX_CHARS ? text : `${text.slice(0, CHAT_RESULT_MAX_CHARS - 1)}…`);

/** Secrets go first, then the length: cutting first could leave half a token the scrubber misses. */
export function chatResultText(result: unknown, context: Omit<ResultContext, 'result'>, renderResult?: (ctx: ResultContext) => string): string | null {
  if (result === null || result === undefined) return null;
  let text: string;
  try {
    text = renderResult ? renderResult({ ...context, result }) : typeof result === 'string' ? result : JSON.stringify(result);
  } catch {
    // A template that fails on an unexpected result must not stop the message; the default is safe.
    text = JSON.stringify(result);
  }
  return shorten(scrubSecrets(text.replace(/\s+/g, ' ').trim()));
}

/** Errors and audit lines can quote what a business answered, too. */
export const chatSafeText = (text: string): string => scrubSecrets(text);
