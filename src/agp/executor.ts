import type { ExecutionRequest, Executor } from '../core/executor.js';
import type { AgentRecord } from '../core/model.js';
import type { BusinessDirectory } from './businesses.js';
import type { AdapterRunner } from './runner.js';
import { asRecord } from '../lib/records.js';

export interface AgpExecutorDeps {
  businesses: BusinessDirectory;
  runner: AdapterRunner;
  findAgentByName(name: string): Promise<AgentRecord | null>;
}

/**
 * The executor of operations declared `executor: { type: agp }`: an approved proposal whose params
 * are `{ businessId, request }` runs as that business's execute. Remote, like the http executor: it
 * runs outside the database transaction under the core's execution claim, and the proposal id is the
 * idempotency key the business sees, so a retry after a crash is a repeat, not a second order.
 */
export function createAgpExecutor(deps: AgpExecutorDeps): Executor {
  return {
    kind: 'remote',
    async run(request: ExecutionRequest) {
      const businessId = request.params['businessId'];
      const params = asRecord(request.params['request']);
      const business = typeof businessId === 'string' ? deps.businesses.get(businessId) : undefined;
      if (!business || !params) throw new Error(`proposal ${request.proposalId} names no configured AGP business`);
      const agent = await deps.findAgentByName(request.agent);
      if (!agent) throw new Error(`agent ${request.agent} no longer exists`);
      return deps.runner.run({ business, agentId: agent.id, transactionId: request.proposalId }, (ctx) =>
        business.adapter.execute(params, { idempotencyKey: request.proposalId }, ctx),
      );
    },
  };
}
