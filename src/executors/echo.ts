import type { ExecutionRequest, Executor } from '../core/executor.js';

/**
 * The built-in executor of the shipped example: it performs no outside effect and answers with
 * what it would have done, inside the commit transaction.
 */
export const echoExecutor: Executor = {
  kind: 'local',
  async run(request: ExecutionRequest) {
    return { echoed: true, operation: request.operation, params: request.params, approvedBy: request.approvedBy };
  },
};
