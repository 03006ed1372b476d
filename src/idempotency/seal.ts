import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { TokenSealer } from '../core/request-identity.js';

/**
 * Stored responses can hold secrets (a proposal's confirmToken, an adapter's order token), which
 * twokey otherwise keeps only as SHA-256. So they are stored encrypted (AES-256-GCM) under a key
 * derived from the caller's own API key, which the database never holds: a copy of the database
 * alone cannot read them, and a replay, which arrives with that API key, can.
 */

export interface SealedResponse {
  v: 1;
  iv: string;
  tag: string;
  data: string;
}

const INFO = 'twokey idempotency response v1';

function keyFor(secret: string, scope: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, scope, purpose, 32));
}

/**
 * `scope` (agent and key) is also authenticated data: a sealed body cannot be moved to another key.
 * `purpose` keeps keys for different uses of one secret apart (Discord interaction tokens, sealed
 * under the bot token, use their own).
 */
export function seal(plaintext: string, secret: string, scope: string, purpose = INFO): SealedResponse {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFor(secret, scope, purpose), iv);
  cipher.setAAD(Buffer.from(scope, 'utf8'));
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return { v: 1, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
}

function isSealed(value: unknown): value is SealedResponse {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Record<string, unknown>;
  return record['v'] === 1 && typeof record['iv'] === 'string' && typeof record['tag'] === 'string' && typeof record['data'] === 'string';
}

/** The plaintext, or null when it cannot be opened with this secret (another key, tampering). */
export function unseal(sealed: unknown, secret: string, scope: string, purpose = INFO): string | null {
  if (!isSealed(sealed)) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyFor(secret, scope, purpose), Buffer.from(sealed.iv, 'base64'));
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
