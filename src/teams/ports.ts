import type { GrantService } from '../core/grant-service.js';
import type { Clock, OperationApprovalView } from '../core/model.js';
import type { People } from '../core/people.js';
import type { Store } from '../core/ports.js';
import type { ProposalService } from '../core/proposals.js';
import type { ClickInbox } from '../outbox/inbox.js';

/** The slice of twokey a Teams click needs; the runtime (or a test) hands in exactly this. */
export interface TeamsServices {
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'retry' | 'preview'>;
  store: Pick<Store, 'getProposal' | 'getAgent' | 'listApprovals'>;
  operation(name: string): OperationApprovalView | undefined;
  /** "Approve for …": approve and grant (absent: the button is refused). */
  grants?: Pick<GrantService, 'approveAndGrant'>;
  clock: Clock;
  /** Who is the same human behind several identities (config `people:`). */
  people?: People;
  /** Where clicks are stored before they are answered. */
  inbox: Pick<ClickInbox, 'store' | 'wake' | 'settle' | 'guard'>;
}
