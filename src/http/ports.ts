import type { AgentService } from '../core/agents.js';
import type { ChangeFeed } from '../core/changes.js';
import type { OperationSpec } from '../core/model.js';
import type { ProposalService } from '../core/proposals.js';
import type { RequestIdentity } from '../core/request-identity.js';

/**
 * The slice of twokey the agent API needs, declared here so the runtime (or a test) hands in exactly
 * this rather than its whole set of services.
 */
export interface AgentApiServices {
  agents: Pick<AgentService, 'authenticate'>;
  proposals: Pick<ProposalService, 'propose' | 'get' | 'viewForAgent' | 'commit' | 'commitWithApprovals' | 'cancel'>;
  /** `reuse: true`: the request identity every way in shares (src/core/request-identity.ts). */
  requests: Pick<RequestIdentity, 'proposeOnce'>;
  changes: Pick<ChangeFeed, 'next'>;
  operations(): OperationSpec[];
}

/** Where resume states are kept; src/db/resume-state-store.ts implements it. */
export interface ResumeStates {
  put(proposalId: string, agentId: string, sealed: Record<string, unknown>, at: Date): Promise<void>;
  get(proposalId: string, agentId: string): Promise<Record<string, unknown> | null>;
}
