import { createHmac } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { signPayload } from '../core/secrets.js';
import { injectTrace } from '../tracing/index.js';
import { loadUndici } from '../lib/lazy-undici.js';

export interface SignedPostOptions {
  url: string;
  secret: string;
  body: string;
  headers?: Record<string, string>;
  timeoutMs: number;
  clock: () => Date;
  /** Where connections may go (callbacks: the address guard); undici's default agent otherwise. */
  dispatcher?: Dispatcher;
  /** Aborts the call early (the outbox's job deadline). */
  signal?: AbortSignal;
  /** Adds the Standard Webhooks headers, signed with this key, under this message id. */
  standardWebhook?: { id: string; key: Buffer };
}

/**
 * The key a `whsec_…` secret stands for. Standard Webhooks defines `whsec_` + base64 of the key, which
 * is what twokey mints; secrets minted by earlier versions are unpadded base64url of the same kind of key.
 * Both decode here to the same bytes, so an agent keeps its secret across the change.
 */
export function webhookKey(secret: string): Buffer {
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  return Buffer.from(encoded.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

/** `v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>` (Standard Webhooks). */
export function standardWebhookSignature(key: Buffer, id: string, unixSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${unixSeconds}.${body}`).digest('base64')}`;
}

/** What a signed POST was answered: the status, the headers, and the body while it streams. */
export interface SignedPostAnswer {
  status: number;
  /** True for a 2xx status. */
  ok: boolean;
  /** A header's value (the first, when the receiver repeated it), by its lower-case name. */
  header(name: string): string | undefined;
  /** The body as it arrives: read it up to a cap (src/lib/bounded-body.ts), or `discard()` it. */
  body: AsyncIterable<Uint8Array>;
  /** Drops the body unread; a short one is drained so its connection can be used again. */
  discard(): Promise<void>;
}

/**
 * Every request twokey signs (executor calls, decision callbacks) goes out here:
 * `X-Twokey-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, JSON, bounded in time.
 * Redirects are never followed: the signed body and its signature go to the URL that was checked
 * or nowhere, and a 3xx answer is a failed delivery.
 * A failure to get any answer throws with a message safe to record (no URL, no secret).
 * Sent with undici's `request`, not `fetch`: fetch wraps each call in web streams, a Request and
 * Headers, and writes the body apart from its headers; a call cost about four times the CPU.
 */
export async function postSigned(options: SignedPostOptions): Promise<SignedPostAnswer> {
  const { request } = await loadUndici();
  const unixSeconds = Math.floor(options.clock().getTime() / 1000);
  const signature = signPayload(options.secret, options.body, unixSeconds);
  const standard = options.standardWebhook
    ? {
        'webhook-id': options.standardWebhook.id,
        'webhook-timestamp': String(unixSeconds),
        'webhook-signature': standardWebhookSignature(options.standardWebhook.key, options.standardWebhook.id, unixSeconds, options.body),
      }
    : {};
  // The receiver joins the trace of the span this call runs in (the execute span, a callback's).
  const trace: Record<string, string> = {};
  injectTrace(trace);
  const timeout = AbortSignal.timeout(options.timeoutMs);
  try {
    // undici's request follows no redirect.
    const answer = await request(options.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...trace, ...options.headers, ...standard, 'x-twokey-signature': signature },
      body: options.body,
      signal: options.signal ? AbortSignal.any([timeout, options.signal]) : timeout,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
    return {
      status: answer.statusCode,
      ok: answer.statusCode >= 200 && answer.statusCode < 300,
      header(name) {
        const value = answer.headers[name];
        return Array.isArray(value) ? value[0] : value;
      },
      body: answer.body,
      async discard() {
        await answer.body.dump().catch(() => undefined);
      },
    };
  } catch (error) {
    const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
    throw new Error(timedOut ? `timed out after ${options.timeoutMs} ms` : `connection failed${refusalOf(error)}`, { cause: error });
  }
}

/** A refused address is worth saying in the job's error: the operator may need to allow it. */
function refusalOf(error: unknown): string {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause.name === 'RefusedAddressError') return `: ${cause.message}`;
  }
  return '';
}
