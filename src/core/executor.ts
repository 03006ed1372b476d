/** What an executor receives: the approved proposal, never the token. */
export interface ExecutionRequest {
  proposalId: string;
  operation: string;
  params: Record<string, unknown>;
  agent: string;
  approvedBy: string[];
  approvedAt: string;
}

/**
 * Runs an approved operation's side effect.
 * - `local` executors run inside the commit transaction: the effect, the token's consumption and the
 *   audit row commit or roll back together.
 * - `remote` executors run outside any transaction, under an execution claim, and receive the
 *   proposal id as their idempotency key so a repeat after a crash is harmless.
 */
export interface Executor {
  readonly kind: 'local' | 'remote';
  /**
   * The call changes nothing downstream (an upstream tool the config marks read-only). Decided at
   * propose time, it runs before anything is recorded, and the proposal, its decision, the result and
   * their audit rows are then written as one statement: a read needs no claim, since repeating it
   * harms nothing. A process that dies during the call leaves no record, and its caller got nothing.
   */
  readonly readOnly?: boolean;
  run(request: ExecutionRequest): Promise<unknown>;
}

export type ExecutorResolver = (operation: string) => Executor;
