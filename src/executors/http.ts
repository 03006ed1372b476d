import type { ExecutionRequest, Executor } from '../core/executor.js';
import { readBodyUpTo } from '../lib/bounded-body.js';
import { postSigned } from './signed-post.js';

export interface HttpExecutorOptions {
  url: string;
  secret: string;
  timeoutMs: number;
  clock?: () => Date;
}

/** The most of an answer twokey reads and keeps as the result; the rest is not downloaded. */
export const MAX_RESULT_BYTES = 64 * 1024;

/** What a 2xx answer becomes: its JSON, else its text; past the cap, the first bytes marked as truncated. */
function resultOf(bytes: Buffer, truncated: boolean): unknown {
  const text = bytes.toString('utf8');
  if (truncated) return { truncated: true, maxBytes: MAX_RESULT_BYTES, body: text };
  if (!text) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { body: text };
  }
}

/**
 * POSTs the approved proposal to a downstream service, signed with the operation's secret and
 * carrying the proposal id as `Idempotency-Key`, so a repeat after a crash is recognised downstream.
 * Non-2xx, timeouts and connection errors are failures; the caller keeps the token unconsumed. The
 * answer is read up to 64 KiB while it streams; a longer one is kept as its first 64 KiB, marked
 * `truncated`, and the rest is never downloaded.
 */
export function createHttpExecutor(options: HttpExecutorOptions): Executor {
  const clock = options.clock ?? (() => new Date());
  return {
    kind: 'remote',
    async run(request: ExecutionRequest) {
      const response = await postSigned({
        url: options.url,
        secret: options.secret,
        body: JSON.stringify(request),
        headers: { 'idempotency-key': request.proposalId },
        timeoutMs: options.timeoutMs,
        clock,
      }).catch((error: unknown) => {
        throw new Error(`executor ${error instanceof Error ? error.message : 'failed'}`, { cause: error });
      });
      if (!response.ok) {
        // The body of a refusal is not kept: dropped unread (a short one drained, so the connection is reused).
        await response.discard();
        throw new Error(`executor answered HTTP ${response.status}`);
      }
      const { bytes, truncated } = await readBodyUpTo(response.body, MAX_RESULT_BYTES).catch((error: unknown) => {
        throw new Error(`executor answer broke off: ${error instanceof Error && error.name === 'TimeoutError' ? 'timed out' : 'connection lost'}`, {
          cause: error,
        });
      });
      return resultOf(bytes, truncated);
    },
  };
}
