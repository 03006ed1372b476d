import type { ExecutionRequest, Executor } from '../core/executor.js';
import { postSigned } from './signed-post.js';

export interface HttpExecutorOptions {
  url: string;
  secret: string;
  timeoutMs: number;
  clock?: () => Date;
}

const MAX_RESULT_BYTES = 64 * 1024;

/**
 * POSTs the approved proposal to a downstream service, signed with the operation's secret and
 * carrying the proposal id as `Idempotency-Key`, so a repeat after a crash is recognised downstream.
 * Non-2xx, timeouts and connection errors are failures; the caller keeps the token unconsumed.
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
      const text = (await response.text()).slice(0, MAX_RESULT_BYTES);
      if (!response.ok) throw new Error(`executor answered HTTP ${response.status}`);
      if (!text) return null;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return { body: text };
      }
    },
  };
}
