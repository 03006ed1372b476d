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
  run(request: ExecutionRequest): Promise<unknown>;
}

export type ExecutorResolver = (operation: string) => Executor;
