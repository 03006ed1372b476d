import { createPublicKey, verify, type KeyObject } from 'node:crypto';

/** DER prefix of an Ed25519 SubjectPublicKeyInfo: node:crypto takes keys as SPKI, Discord gives the 32 raw bytes. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** How far a request's timestamp may be from our clock, either way, before it counts as a replay. */
export const DISCORD_SIGNATURE_WINDOW_SECONDS = 300;

export function discordPublicKey(hex: string): KeyObject {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error('DISCORD_PUBLIC_KEY must be 64 hexadecimal characters');
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(hex, 'hex')]), format: 'der', type: 'spki' });
}

export type SignatureCheck = 'ok' | 'missing' | 'malformed' | 'stale' | 'future' | 'invalid';

export interface SignedRequest {
  /** `X-Signature-Ed25519`: 64 bytes as hex. */
  signature: string | undefined;
  /** `X-Signature-Timestamp`: unix seconds. */
  timestamp: string | undefined;
  rawBody: Buffer;
}

/**
 * Discord signs `timestamp + rawBody`. The clock is an argument so tests can pin the window's edges;
 * a timestamp outside the window is refused even with a valid signature, so a captured request
 * cannot be replayed later (or pre-signed for later). The Ed25519 verification (a fifth of a
 * millisecond of CPU on a small machine) runs in libuv's thread pool: a burst of clicks is verified
 * beside the event loop, which meanwhile reads, stores and answers the others.
 */
export async function checkDiscordSignature(publicKey: KeyObject, request: SignedRequest, now: Date): Promise<SignatureCheck> {
  const { signature, timestamp, rawBody } = request;
  if (!signature || !timestamp) return 'missing';
  if (!/^[0-9a-fA-F]{128}$/.test(signature) || !/^\d{1,12}$/.test(timestamp)) return 'malformed';
  const skew = Math.floor(now.getTime() / 1000) - Number(timestamp);
  if (skew > DISCORD_SIGNATURE_WINDOW_SECONDS) return 'stale';
  if (skew < -DISCORD_SIGNATURE_WINDOW_SECONDS) return 'future';
  const signed = Buffer.concat([Buffer.from(timestamp, 'utf8'), rawBody]);
  return new Promise((resolve) => {
    verify(null, signed, publicKey, Buffer.from(signature, 'hex'), (error, valid) => resolve(!error && valid ? 'ok' : 'invalid'));
  });
}
