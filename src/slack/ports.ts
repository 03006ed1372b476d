import type { GrantService } from '../core/grant-service.js';
import type { Clock, OperationApprovalView, OperationSpec } from '../core/model.js';
import type { Store } from '../core/ports.js';
import type { ProposalService } from '../core/proposals.js';
import type { ClickInbox } from '../outbox/inbox.js';

/** How Slack sees an operation: the core's view of who approves it (and the groups its approver rule names) and which standing approvals it offers. */
export type SlackOperationView = OperationApprovalView;

/**
 * The slice of twokey Slack needs: the decisions, the proposal reads and the clock. Declared here so
 * the runtime (or a test) hands in exactly this, not its whole set of services.
 */
export interface SlackServices {
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'retry' | 'preview'>;
  store: Pick<Store, 'getProposal'>;
  operation(name: string): SlackOperationView | undefined;
  /** Every configured operation: whether any names a Slack user group decides whether a click needs its proposal read. */
  operations(): readonly Pick<OperationSpec, 'approval' | 'policy'>[];
  clock: Clock;
  /** Standing approvals ("Approve for 1 h…"), when the runtime offers them. */
  grants?: Pick<GrantService, 'approveAndGrant'>;
  /** Where clicks are stored before they are acknowledged. */
  inbox: Pick<ClickInbox, 'store' | 'wake' | 'settle' | 'guard'>;
}
