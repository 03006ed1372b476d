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

/**
 * `Attached`: rows a route hands over to be written in the statement that settles its key (an `open`
 * AGP execute's audit row and the tokens its business minted), so that what the request did and
 * the answer to replay commit as one. The store writes them whichever way the key is settled: they
 * record work that happened, whatever the answer says.
 */
export interface IdempotencyStore<Attached = never> {
  /**
   * Takes the key for this request: inserts an in-flight row, or replaces one that has expired, or
   * an in-flight row of the same request older than `staleBefore` (its process died). false when
   * another row holds the key.
   */
  acquire(claim: IdempotencyClaim, staleBefore: Date): Promise<boolean>;
  get(agentId: string, key: string): Promise<IdempotencyRecord | null>;
  /** Stores the response of the claim created at `createdAt` (the key's row is left alone if it was taken over), and `attached`. */
  complete(agentId: string, key: string, createdAt: Date, responseStatus: number, responseBody: unknown, attached?: Attached): Promise<void>;
  /** Frees the key of the claim created at `createdAt` (the answer is not kept, a retry may run), and writes `attached`. */
  release(agentId: string, key: string, createdAt: Date, attached?: Attached): Promise<void>;
  deleteExpired(now: Date): Promise<number>;
}
