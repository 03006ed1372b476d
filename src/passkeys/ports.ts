import type { AuditEventInput } from '../core/model.js';

/** A registered passkey. `owner` is the person (`person:NAME`) or, with no person configured, the identity. */
export interface PasskeyRecord {
  credentialId: string;
  owner: string;
  label: string;
  /** COSE public key, base64url. */
  publicKey: string;
  counter: number;
  transports: string[];
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export type ChallengePurpose = 'register' | 'approve';

export interface PasskeyChallengeRecord {
  nonce: string;
  owner: string;
  purpose: ChallengePurpose;
  proposalId: string | null;
  challenge: string;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

/** The writes of one passkey step, inside one transaction with its audit event. */
export interface PasskeyTransaction {
  insertChallenge(row: Omit<PasskeyChallengeRecord, 'usedAt'>): Promise<void>;
  /** Marks an unused, unexpired challenge of this owner and purpose used; null when it was not. */
  useChallenge(nonce: string, owner: string, purpose: ChallengePurpose, now: Date): Promise<PasskeyChallengeRecord | null>;
  insertPasskey(row: Omit<PasskeyRecord, 'lastUsedAt' | 'revokedAt'>): Promise<boolean>;
  /** Moves the counter forward (never back) and notes the use; false when the passkey is revoked or the counter did not grow. */
  recordUse(credentialId: string, counter: number, now: Date): Promise<boolean>;
  revoke(credentialId: string, owner: string, now: Date): Promise<PasskeyRecord | null>;
  appendAudit(event: AuditEventInput, at: Date): Promise<void>;
}

/** Passkeys and their challenges (tables passkeys, passkey_challenges). */
export interface PasskeyStore {
  transaction<T>(work: (tx: PasskeyTransaction) => Promise<T>): Promise<T>;
  get(credentialId: string): Promise<PasskeyRecord | null>;
  listOf(owner: string): Promise<PasskeyRecord[]>;
  getChallenge(nonce: string): Promise<PasskeyChallengeRecord | null>;
}
