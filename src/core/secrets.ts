import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomBytesFromPool } from '../lib/random.js';
import canonicalize from 'canonicalize';

/** 32 random bytes, base64url: 43 characters. */
function randomSecret(prefix: string): string {
  return prefix + randomBytesFromPool(32).toString('base64url');
}

export const mintConfirmToken = (): string => randomSecret('tk_conf_');
export const mintApiKey = (): string => randomSecret('tk_agent_');
/**
 * `whsec_` + 32 random bytes in standard base64 (44 characters, padded): the Standard Webhooks
 * format, which receivers' libraries (`new Webhook(secret)`) decode as it is. Secrets minted by
 * earlier versions are base64url; `webhookKey` reads both.
 */
export const mintCallbackSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** Compares two hex digests without leaking, through timing, how many leading characters match. */
export function digestsEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}

/** RFC 8785 (JCS) canonical JSON, so key order and whitespace never change a hash. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be canonicalised as JSON');
  return text;
}

export const paramsHash = (params: unknown): string => sha256Hex(canonicalJson(params));

/** `t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`, the signature on callbacks and executor calls. */
export function signPayload(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** A short, non-secret prefix an operator can recognise a key by. */
export const displayPrefix = (secret: string): string => `${secret.slice(0, 13)}…`;
