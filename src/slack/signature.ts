import { createHmac, timingSafeEqual } from 'node:crypto';

/** Slack's own replay window. Bolt only refuses old timestamps; a clock far ahead is refused too. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

export type SignatureVerdict = 'valid' | 'missing' | 'malformed' | 'stale' | 'mismatch';

export interface SignedRequest {
  signingSecret: string;
  /** `X-Slack-Request-Timestamp`: unix seconds. */
  timestamp: string | undefined;
  /** `X-Slack-Signature`: `v0=` + hex HMAC-SHA256. */
  signature: string | undefined;
  rawBody: Buffer;
  now: Date;
}

/**
 * Checks Slack's v0 request signature: HMAC-SHA256(secret, `v0:{timestamp}:{raw body}`), with the
 * timestamp no more than 5 minutes from `now` in either direction. Pure: the clock is an argument.
 */
export function verifySlackSignature(request: SignedRequest): SignatureVerdict {
  const { timestamp, signature } = request;
  if (!timestamp || !signature) return 'missing';
  if (!/^\d{1,12}$/.test(timestamp) || !/^v0=[0-9a-f]{64}$/.test(signature)) return 'malformed';
  const skew = Math.abs(Math.floor(request.now.getTime() / 1000) - Number(timestamp));
  if (skew > SIGNATURE_TOLERANCE_SECONDS) return 'stale';
  const expected = createHmac('sha256', request.signingSecret).update(`v0:${timestamp}:`).update(request.rawBody).digest();
  const given = Buffer.from(signature.slice(3), 'hex');
  // Constant-time: a byte-by-byte compare would let a caller find the signature one byte at a time.
  return timingSafeEqual(expected, given) ? 'valid' : 'mismatch';
}
