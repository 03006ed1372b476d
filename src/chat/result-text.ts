import { displaySafe, displaySafeJson } from '../config/display-text.js';
import type { ResultContext } from '../config/summary-template.js';
import { redactSecretValues, scrubAnySecret } from '../lib/secrets.js';

/**
 * What a chat channel sees of an executor's answer. Everyone in the channel reads it, and a
 * downstream service's answer may carry what it was called with (an API key, a password, the AGP
 * echo business's `confirmationToken`), so by default chat shows the outcome only ("Committed"),
 * or the operation's `result` template when it has one. Raw JSON is shown only when the operator
 * opted in (`chatResult: json`), and then with secret-named values and secret-shaped strings
 * redacted. The agent and the console keep the whole result.
 */

/** Long enough for a status and an id; the rest is one click away in the console. */
export const CHAT_RESULT_MAX_CHARS = 200;

/** How an operation's result reaches chat: its `result` template, else JSON if opted in, else nothing. */
export interface ChatResultSettings {
  template?: ((ctx: ResultContext) => string) | undefined;
  json?: boolean;
}

const shorten = (text: string): string => (text.length <= CHAT_RESULT_MAX_CHARS ? text : `${text.slice(0, CHAT_RESULT_MAX_CHARS - 1)}…`);
const oneLine = (text: string): string => text.replace(/\s+/g, ' ').trim();

/** The result as opted-in JSON: secret-named values gone, secret shapes gone, every string display-safe. */
const redactedJson = (result: unknown): string => JSON.stringify(displaySafeJson(redactSecretValues(result))) ?? 'null';

/**
 * The text chat shows after "Committed", or null for none. Secrets go first, then the length:
 * cutting first could leave half a token the scrubber misses.
 */
export function chatResultText(result: unknown, context: Omit<ResultContext, 'result'>, settings: ChatResultSettings = {}): string | null {
  if (result === null || result === undefined) return null;
  let text: string;
  if (settings.template) {
    try {
      text = settings.template({ ...context, result });
    } catch {
      // A template that fails on an unexpected result must not stop the message; the outcome alone is safe.
      return null;
    }
  } else if (settings.json) {
    text = redactedJson(result);
  } else {
    return null;
  }
  const shown = shorten(scrubAnySecret(oneLine(text)));
  return shown === '' ? null : shown;
}

/** Errors and audit lines can quote what a business answered, too. */
export const chatSafeText = (text: string): string => displaySafe(scrubAnySecret(text));
