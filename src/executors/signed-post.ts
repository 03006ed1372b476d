import { createHmac } from 'node:crypto';
import type { Dispatcher, Response } from 'undici';
import type * as Undici from 'undici';
import { signPayload } from '../core/secrets.js';
import { injectTrace } from '../tracing/index.js';

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

/**
 * undici (a hundred modules) loads with the first request sent, not before the server answers; once.
 * Each `import()` resolves the module again (with a loader hook, through its thread).
 */
let undici: Promise<typeof Undici> | null = null;
const loadUndici = () => (undici ??= import('undici'));

/**
 * Every request twokey signs (executor calls, decision callbacks) goes out here:
 * `X-Twokey-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, JSON, bounded in time.
 * Redirects are never followed: the signed body and its signature go to the URL that was checked
 * or nowhere, and a 3xx answer is a failed delivery.
 * A failure to get any answer throws with a message safe to record (no URL, no secret).
 */
export async function postSigned(options: SignedPostOptions): Promise<Response> {
  const { fetch } = await loadUndici();
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
    return await fetch(options.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...trace, ...options.headers, ...standard, 'x-twokey-signature': signature },
      body: options.body,
      redirect: 'manual',
      signal: options.signal ? AbortSignal.any([timeout, options.signal]) : timeout,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
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
