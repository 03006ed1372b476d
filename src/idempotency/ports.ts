/** A row of `idempotency_keys`. */
export interface IdempotencyRecord {
  agentId: string;
  key: string;
  requestHash: string;
  status: 'in_flight' | 'done';
  responseStatus: number | null;
  /** Sealed (encrypted) response; see seal.ts. */
  responseBody: unknown;
  createdAt: Date;
  expiresAt: Date;
}

export interface IdempotencyClaim {
  agentId: string;
  key: string;
  requestHash: string;
  createdAt: Date;
  expiresAt: Date;
}

export interface IdempotencyStore {
  /**
   * Takes the key for this request: inserts an in-flight row, or replaces one that has expired, or
   * an in-flight row of the same request older than `staleBefore` (its process died). false when
   * another row holds the key.
   */
  acquire(claim: IdempotencyClaim, staleBefore: Date): Promise<boolean>;
  get(agentId: string, key: string): Promise<IdempotencyRecord | null>;
  /** Stores the response of the claim created at `createdAt`; does nothing if the row was taken over. */
  complete(agentId: string, key: string, createdAt: Date, responseStatus: number, responseBody: unknown): Promise<void>;
  /** Frees the key of the claim created at `createdAt` (nothing happened, a retry may run). */
  release(agentId: string, key: string, createdAt: Date): Promise<void>;
  deleteExpired(now: Date): Promise<number>;
}
