import type { GrantBound } from '../../core/grants.js';
import type { ApprovalRecord, ProposalRecord } from '../../core/model.js';

/** A proposal as the console lists and shows it: the record and what the viewer may do with it. */

/** Whether the viewer may press Approve / Reject on a proposal, and if not, why (shown to them). */
export type Eligibility = { can: true; approved: boolean } | { can: false; why: string };

export interface ProposalItem {
  proposal: ProposalRecord;
  agentName: string;
  description: string;
  approvals: ApprovalRecord[];
  eligibility: Eligibility;
  /** "Approve for…" durations from the operation's `grants:`; empty when it allows none. */
  grantDurationsMs: readonly number[];
  /** The bounds a bounded grant given on this proposal would set: every declared param. */
  grantBounds: readonly GrantBound[];
  /** The operation says `stepUp: passkey`: Approve runs a passkey assertion made for this proposal. */
  stepUp: boolean;
}
