import { randomBytes, randomFillSync } from 'node:crypto';

/**
 * Cryptographically random bytes, drawn from a pool filled 4 KiB at a time. Asking the CSPRNG for
 * 4 KiB costs about what asking it for 12 bytes does, and one request takes several small values (its
 * id, a transaction id, a minted token, an IV); Node's own `randomUUID` keeps such a cache too. A byte
 * is handed out once: each caller gets a copy of bytes no one else got, and a spent pool is replaced.
 */

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

export function randomBytesFromPool(size: number): Buffer {
  if (size > POOL_BYTES / 8) return randomBytes(size);
  if (offset + size > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafeSlow(POOL_BYTES));
    offset = 0;
  }
  const bytes = Buffer.from(pool.subarray(offset, offset + size));
  // Nothing left in memory that a later caller could be handed again.
  pool.fill(0, offset, offset + size);
  offset += size;
  return bytes;
}
