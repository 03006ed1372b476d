import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from './errors.js';
import { systemErrorText } from '../lib/system-errors.js';
import {
  alertMessage,
  checkpointMessage,
  keyIdOf,
  type AuditAlert,
  type AuditCheckpoint,
  type UnsignedAuditAlert,
  type UnsignedCheckpoint,
} from '../core/audit-chain.js';

export interface CheckpointSigner {
  keyId: string;
  publicKey: KeyObject;
  sign(checkpoint: UnsignedCheckpoint): AuditCheckpoint;
  /** An alert signed the same way (canonical JSON, Ed25519), so its receiver can check who sent it. */
  signAlert(alert: UnsignedAuditAlert): AuditAlert;
}

/** Where the key lives when TWOKEY_AUDIT_KEY is unset: beside the data directory, never inside the database. */
export const defaultKeyFile = (dataDir: string): string => `${resolve(dataDir)}.audit-key.pem`;

/** `TWOKEY_AUDIT_KEY`: base64 of a 32-byte Ed25519 seed, or a PKCS#8 PEM. */
export function parseAuditKey(text: string): KeyObject {
  const trimmed = text.trim();
  if (trimmed.startsWith('-----BEGIN')) return createPrivateKey(trimmed);
  const seed = Buffer.from(trimmed, 'base64');
  if (seed.length !== 32) throw new Error('TWOKEY_AUDIT_KEY: expected base64 of a 32-byte Ed25519 seed, or a PKCS#8 PEM');
  // PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410): a fixed 16-byte prefix.
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]);
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
}

/** Reads the key file, or creates it (0600, in a 0700 directory when the directory is new). */
export function loadOrCreateKeyFile(path: string): KeyObject {
  let text: string | null = null;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT')
      throw new ConfigError(`cannot read the audit key file ${resolve(path)} (TWOKEY_AUDIT_KEY_FILE): ${systemErrorText(code ?? 'unreadable')}`, []);
  }
  if (text !== null) {
    try {
      return createPrivateKey(text);
    } catch {
      throw new ConfigError(`the audit key file ${resolve(path)} (TWOKEY_AUDIT_KEY_FILE) does not hold a PEM private key`, []);
    }
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const { privateKey } = generateKeyPairSync('ed25519');
  // Written whole under a name of its own, then linked into place: two processes starting at once
  // must neither overwrite each other's new key nor read the other's file before its key is in it
  // (a file created with 'wx' and then written was read empty by the process that lost the race).
  const partial = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(partial, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600, flag: 'wx' });
  try {
    chmodSync(partial, 0o600);
    linkSync(partial, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return createPrivateKey(readFileSync(path, 'utf8'));
    throw error;
  } finally {
    unlinkSync(partial);
  }
  return privateKey;
}

export function createSigner(privateKey: KeyObject): CheckpointSigner {
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error('the audit key must be an Ed25519 key');
  const publicKey = createPublicKey(privateKey);
  const keyId = keyIdOf(publicKey);
  return {
    keyId,
    publicKey,
    sign(checkpoint) {
      const unsigned = { ...checkpoint, keyId };
      return { ...unsigned, signature: sign(null, checkpointMessage(unsigned), privateKey).toString('base64') };
    },
    signAlert(alert) {
      const unsigned = { ...alert, keyId };
      return { ...unsigned, signature: sign(null, alertMessage(unsigned), privateKey).toString('base64') };
    },
  };
}

export function signerFromEnvironment(env: { TWOKEY_AUDIT_KEY?: string; TWOKEY_AUDIT_KEY_FILE?: string; TWOKEY_DATA_DIR: string }): CheckpointSigner {
  const key = env.TWOKEY_AUDIT_KEY
    ? parseAuditKey(env.TWOKEY_AUDIT_KEY)
    : loadOrCreateKeyFile(env.TWOKEY_AUDIT_KEY_FILE ?? defaultKeyFile(env.TWOKEY_DATA_DIR));
  return createSigner(key);
}
