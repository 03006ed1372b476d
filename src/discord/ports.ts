import type { GrantService } from '../core/grant-service.js';
import type { Clock, OperationApprovalView } from '../core/model.js';
import type { People } from '../core/people.js';
import type { Store } from '../core/ports.js';
import type { ProposalService } from '../core/proposals.js';
import type { ClickInbox } from '../outbox/inbox.js';

/**
 * The slice of twokey Discord needs to answer a click, declared here so the runtime (or a unit test,
 * with plain fakes) hands in exactly this rather than its whole set of services.
 */
export interface DiscordServices {
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'retry'>;
  store: Pick<Store, 'getProposal' | 'getAgent' | 'listApprovals'>;
  operation(name: string): OperationApprovalView | undefined;
  /** "Approve for…": approve and grant (absent: the button is refused). */
  grants?: Pick<GrantService, 'approveAndGrant'>;
  clock: Clock;
  /** Who is the same human behind several identities (config `people:`). */
  people?: People;
  /** Where clicks are stored before they are answered. */
  inbox: Pick<ClickInbox, 'store' | 'wake' | 'withdraw' | 'settle' | 'guard'>;
}

/** One piece of work that must run on one replica of the fleet at a time (the gateway connection). */
export interface ElectedWork {
  /** The advisory lock key; every replica uses the same one for the same work. */
  key: number;
  name: string;
  log: () => { info(details: object, message?: string): void; warn(details: object, message?: string): void };
  /** How often a standby tries to take over, and the leader checks it still leads. */
  retryMs?: number;
  onElected?(): Promise<void> | void;
  onDeposed?(): Promise<void> | void;
}

/**
 * Elects one replica for `work` (src/db/leader-election.ts: a PostgreSQL advisory lock; on the
 * embedded database this process always leads). The runtime hands it in.
 */
export type LeaderElector = (work: ElectedWork) => { start(): void; stop(): Promise<void> };
