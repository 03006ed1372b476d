import type { ExecutionRequest, Executor } from '../core/executor.js';
import { signPayload } from '../core/secrets.js';

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
      const body = JSON.stringify(request);
      const signature = signPayload(options.secret, body, Math.floor(clock().getTime() / 1000));
      let response: Response;
      try {
        response = await fetch(options.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'idempotency-key': request.proposalId,
            'x-twokey-signature': signature,
          },
          body,
          signal: AbortSignal.timeout(options.timeoutMs),
        });
      } catch (error) {
        const reason = error instanceof Error && error.name === 'TimeoutError' ? `timed out after ${options.timeoutMs} ms` : 'connection failed';
        throw new Error(`executor ${reason}`, { cause: error });
      }
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
