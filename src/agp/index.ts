import type { AgentRecord, Clock } from '../core/model.js';
import type { BusinessDirectory } from './businesses.js';
import { createAgpExecutor } from './executor.js';
import type { AgpTokenStore } from './ports.js';
import { createAdapterRunner } from './runner.js';

export { parseBusinesses, ECHO_BUSINESS_ID, type BusinessDefinition, type BusinessDirectory } from './businesses.js';
export { createAgpService, type AgpService, type AgpServiceDeps, type AgpEnvelope, type PrepareResult } from './service.js';
export { registerAgpRoutes, type AgpRouteDeps } from './routes.js';
export { agpMessages } from './messages.js';
export type { GatewayPolicy, ExecutePolicy } from './policy.js';
export type { Adapter, AdapterContext, ExecuteResult } from './adapters/types.js';
export type { AgpTokenStore, AgpTokenRecord } from './ports.js';

export interface AgpRuntimeDeps {
  businesses: BusinessDirectory;
  tokens: AgpTokenStore;
  findAgentByName(name: string): Promise<AgentRecord | null>;
  clock: Clock;
  fetch?: typeof fetch;
}

/**
 * The parts of the AGP dialect that exist before the HTTP layer: the adapter runner and the executor
 * of `executor: { type: agp }` operations, which createServices needs before the proposal service
 * exists (so it cannot depend on it).
 */
export function createAgpRuntime(deps: AgpRuntimeDeps) {
  const runner = createAdapterRunner({ tokens: deps.tokens, clock: deps.clock, ...(deps.fetch ? { fetch: deps.fetch } : {}) });
  const executor = createAgpExecutor({ businesses: deps.businesses, runner, findAgentByName: deps.findAgentByName });
  /**
   * The longest a business call for this operation's proposals can take: the core's execution claim
   * must outlast it, or a live call would be taken over and run a second time.
   */
  function executionTimeoutMs(operation: string): number {
    const timeouts = [...deps.businesses.values()].filter((business) => business.approval?.operation === operation).map((business) => business.timeoutMs);
    return Math.max(0, ...timeouts);
  }
  return { businesses: deps.businesses, tokens: deps.tokens, runner, executor, executionTimeoutMs };
}

export type AgpRuntime = ReturnType<typeof createAgpRuntime>;
