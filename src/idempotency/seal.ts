import { createCipheriv, createDecipheriv, createHash, hkdfSync } from 'node:crypto';
import { randomBytesFromPool } from '../lib/random.js';
import type { TokenSealer } from '../core/request-identity.js';

/**
 * Stored responses can hold secrets (a proposal's confirmToken, an adapter's order token), which
 * twokey otherwise keeps only as SHA-256. So they are stored encrypted (AES-256-GCM) under a key
 * derived from the caller's own API key, which the database never holds: a copy of the database
 * alone cannot read them, and a replay, which arrives with that API key, can.
 */

export interface SealedResponse<Version extends 1 | 2 = 1 | 2> {
  /** 1: a key per secret and scope. 2: a key per secret, the scope as authenticated data only (see `sealResponse`). */
  v: Version;
  iv: string;
  tag: string;
  data: string;
}

const INFO = 'twokey idempotency response v1';

function keyFor(secret: string, scope: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, scope, purpose, 32));
}

/** Keys of version 2 by a digest of their secret and purpose (never the secret itself), the most recently derived kept. */
const secretKeys = new Map<string, Buffer>();
const SECRET_KEYS_KEPT = 1024;

function secretKeyFor(secret: string, purpose: string): Buffer {
  const id = createHash('sha256').update(purpose).update('\u0000').update(secret).digest('base64');
  let key = secretKeys.get(id);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', secret, '', `${purpose} v2`, 32));
    const oldest = secretKeys.size >= SECRET_KEYS_KEPT ? secretKeys.keys().next().value : undefined;
    if (oldest !== undefined) secretKeys.delete(oldest);
    secretKeys.set(id, key);
  }
  return key;
}

function sealUnder<Version extends 1 | 2>(key: Buffer, version: Version, plaintext: string, scope: string): SealedResponse<Version> {
  const iv = randomBytesFromPool(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(scope, 'utf8'));
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { v: version, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
}

/**
 * `scope` (agent and key) is also authenticated data: a sealed body cannot be moved to another key.
 * `purpose` keeps keys for different uses of one secret apart (Discord interaction tokens, sealed
 * under the bot token, use their own).
 */
export function seal(plaintext: string, secret: string, scope: string, purpose = INFO): SealedResponse<1> {
  return sealUnder(keyFor(secret, scope, purpose), 1, plaintext, scope);
}

/**
 * A stored response, sealed once per request: under one key per API key, derived once and then kept
 * (by a digest) instead of derived again for every scope, which cost as much as the sealing itself.
 * The scope stays authenticated data, so a sealed body still opens under its own agent and key only;
 * IVs are random, 96 bits, far from a collision at an agent's rate limit.
 */
export function sealResponse(plaintext: string, secret: string, scope: string): SealedResponse<2> {
  return sealUnder(secretKeyFor(secret, INFO), 2, plaintext, scope);
}

function isSealed(value: unknown): value is SealedResponse {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Record<string, unknown>;
  return (
    (record['v'] === 1 || record['v'] === 2) && typeof record['iv'] === 'string' && typeof record['tag'] === 'string' && typeof record['data'] === 'string'
  );
}

/** The plaintext, or null when it cannot be opened with this secret (another key, tampering). */
export function unseal(sealed: unknown, secret: string, scope: string, purpose = INFO): string | null {
  if (!isSealed(sealed)) return null;
  try {
    const key = sealed.v === 2 ? secretKeyFor(secret, purpose) : keyFor(secret, scope, purpose);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAAD(Buffer.from(scope, 'utf8'));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

/**
 * Seals confirmation tokens kept for a repeated request (src/core/request-identity.ts) under the
 * caller's API key, the same way as stored responses.
 */
export function tokenSealer(secret: string): TokenSealer {
  return {
    seal: (token, scope) => ({ ...seal(token, secret, scope) }),
    unseal: (sealed, scope) => unseal(sealed, secret, scope),
  };
}
