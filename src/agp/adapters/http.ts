import type { Adapter, AdapterContext, ExecuteResult } from './types.js';
import { readBodyUpTo } from '../../lib/bounded-body.js';
import { asRecord } from '../../lib/records.js';

/**
 * A business that speaks AGP over HTTP: twokey forwards each call to `<url>/discover`, `<url>/query`
 * and `<url>/execute` as `POST {businessId, request}`, with the business's credentials added by
 * `ctx.fetch` and, on execute, an `Idempotency-Key` that stays the same across retries. A real
 * business plugs in with a config entry and no code.
 */

export interface HttpAdapterOptions {
  businessId: string;
  url: string;
}

const MAX_RESPONSE_BYTES = 1024 * 1024;
const EXECUTE_STATUSES = new Set(['succeeded', 'pending_confirmation', 'completed', 'error', 'failed']);

/** Names only the status: a body may echo what the business received, credentials included. */
class BusinessCallError extends Error {
  override readonly name = 'BusinessCallError';
}

async function readJson(response: Response, what: string): Promise<unknown> {
  // Read while it streams, so a business answering without end cannot fill memory first.
  const { bytes, truncated } = await readBodyUpTo(response.body, MAX_RESPONSE_BYTES);
  if (truncated) throw new BusinessCallError(`${what} answered more than ${MAX_RESPONSE_BYTES} bytes`);
  const text = bytes.toString('utf8');
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BusinessCallError(`${what} answered with a body that is not JSON`);
  }
}

export function createHttpAdapter(options: HttpAdapterOptions): Adapter {
  const base = options.url.replace(/\/+$/, '');
  const what = `business '${options.businessId}'`;

  async function call(ctx: AdapterContext, path: string, body: unknown, headers: Record<string, string> = {}) {
    const response = await ctx.fetch(`${base}/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await readJson(response, what) };
  }

  function mustSucceed(answer: { status: number; body: unknown }, path: string): unknown {
    if (answer.status < 200 || answer.status >= 300) throw new BusinessCallError(`${what} answered HTTP ${answer.status} to ${path}`);
    return answer.body;
  }

  return {
    async discover(ctx) {
      return mustSucceed(await call(ctx, 'discover', { businessId: options.businessId }), 'discover');
    },

    async query(request, ctx) {
      return mustSucceed(await call(ctx, 'query', { businessId: options.businessId, request }), 'query');
    },

    async execute(params, executeOptions, ctx): Promise<ExecuteResult> {
      const answer = await call(ctx, 'execute', { businessId: options.businessId, request: params }, { 'idempotency-key': executeOptions.idempotencyKey });
      const body = asRecord(answer.body);
      // A 4xx is the business refusing (closed, out of stock): an answer for the agent, not a fault.
      if (answer.status >= 400 && answer.status < 500) {
        const message = typeof body?.['message'] === 'string' ? body['message'] : typeof body?.['error'] === 'string' ? body['error'] : `HTTP ${answer.status}`;
        return { status: 'error', message, httpStatus: answer.status };
      }
      mustSucceed(answer, 'execute');
      if (body && typeof body['status'] === 'string' && EXECUTE_STATUSES.has(body['status'])) return body as ExecuteResult;
      return { status: 'succeeded', data: answer.body };
    },
  };
}
