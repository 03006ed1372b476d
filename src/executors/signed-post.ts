import { signPayload } from '../core/secrets.js';

export interface SignedPostOptions {
  url: string;
  secret: string;
  body: string;
  headers?: Record<string, string>;
  timeoutMs: number;
  clock: () => Date;
}

/**
 * Every request twokey signs (executor calls, decision callbacks) goes out here:
 * `X-Twokey-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, JSON, bounded in time.
 * A failure to get any answer throws with a message safe to record (no URL, no secret).
 */
export async function postSigned(options: SignedPostOptions): Promise<Response> {
  const signature = signPayload(options.secret, options.body, Math.floor(options.clock().getTime() / 1000));
  try {
    return await fetch(options.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...options.headers, 'x-twokey-signature': signature },
      body: options.body,
      signal: AbortSignal.timeout(options.timeoutMs),
    });
  } catch (error) {
    const timedOut = error instanceof Error && error.name === 'TimeoutError';
    throw new Error(timedOut ? `timed out after ${options.timeoutMs} ms` : 'connection failed', { cause: error });
  }
}
