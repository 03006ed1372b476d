import type { OperationDefinition } from '../config/config-file.js';
import type { AgentService } from '../core/agents.js';
import type { AuditService } from '../core/audit.js';
import type { GrantService } from '../core/grant-service.js';
import type { Clock } from '../core/model.js';
import type { People } from '../core/people.js';
import type { Store } from '../core/ports.js';
import type { ProposalService } from '../core/proposals.js';
import type { AuditLog } from '../audit/ports.js';
import type { ConsoleAuth } from '../console/sign-in.js';
import type { JobStore } from '../outbox/ports.js';
import type { PasskeyStore } from '../passkeys/ports.js';

/**
 * The slice of twokey the operator's commands need (the admin socket, `twokey …` on the embedded
 * database), declared here so src/admin never imports the runtime that starts it; the runtime's
 * services satisfy it.
 */
export interface AdminServices {
  clock: Clock;
  store: Pick<Store, 'listProposals' | 'listApprovals' | 'findAgentByName' | 'transaction' | 'getProposal'>;
  operations(): OperationDefinition[];
  operation(name: string): OperationDefinition | undefined;
  agents: Pick<AgentService, 'create' | 'list' | 'revoke'>;
  /** Who is who: `policy test --approver` names the person an approver rule reads. */
  people: Pick<People, 'nameOf'>;
  proposals: Pick<ProposalService, 'get' | 'approve' | 'reject' | 'retry'>;
  grants: Pick<GrantService, 'approveAndGrant' | 'list' | 'revoke'>;
  audit: Pick<AuditService, 'list' | 'verify' | 'events'>;
  /** The stored public keys `audit verify` re-checks step-up assertions against. */
  passkeyStore: Pick<PasskeyStore, 'get'>;
  auditLog: Pick<AuditLog, 'pendingCount'>;
  jobs: Pick<JobStore, 'list' | 'retry'>;
  /** The web console's sign-in links and sessions (`approvers link`, `approvers revoke-sessions`). */
  consoleAuth: Pick<ConsoleAuth, 'mintLink' | 'revokeSessions'>;
}
