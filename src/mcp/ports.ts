import type { OperationDefinition } from '../config/config-file.js';
import type { AgentService } from '../core/agents.js';
import type { ChangeFeed } from '../core/changes.js';
import type { Clock } from '../core/model.js';
import type { ProposalService } from '../core/proposals.js';
import type { RequestIdentity } from '../core/request-identity.js';

/**
 * The slice of twokey the MCP server needs, declared here so the runtime (or a test) hands in exactly
 * this rather than its whole set of services. Its own storage is `McpStore` below (src/db/mcp-store.ts
 * implements it).
 */
export interface McpServices {
  agents: Pick<AgentService, 'authenticate'>;
  proposals: Pick<ProposalService, 'propose' | 'viewForAgent' | 'executeApproved'>;
  /** Finds the request an identical call already opened (shared with /v1 and the framework adapters). */
  requests: Pick<RequestIdentity, 'proposeOnce'>;
  changes: Pick<ChangeFeed, 'next'>;
  operations(): OperationDefinition[];
  operation(name: string): OperationDefinition | undefined;
  clock: Clock;
}

/** What each agent's MCP client declared at `initialize`. */
export interface McpStore {
  rememberClient(agentId: string, urlElicitation: boolean, now: Date): Promise<void>;
  clientSupportsUrlElicitation(agentId: string): Promise<boolean>;
}
