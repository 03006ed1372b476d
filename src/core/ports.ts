import type { GrantTransaction } from './grants.js';
import type { JobClaim, JobCompletion, JobKind, JobKnownState, JobPayloadInputs } from './jobs.js';
import type { AgentRecord, ApprovalRecord, AuditEventInput, AuditEventRecord, ProposalPatch, ProposalRecord, ProposalStatus } from './model.js';

/** Work done inside one database transaction. Every state change and its audit row go through one. */
export interface StoreTransaction {
  /** Reads the proposal and holds its row lock until the transaction ends. */
  lockProposal(id: string): Promise<ProposalRecord | null>;
  /** `lockProposal`, with the proposal's agent and approvals (oldest first), in one round trip. */
  lockProposalWithContext(id: string): Promise<LockedProposal | null>;
  /**
   * Returns the row as stored, so nothing has to read it back. The insert goes out with the
   * transaction's buffered rows, before its commit: nothing in its transaction reads it after.
   */
  insertProposal(proposal: ProposalRecord): Promise<ProposalRecord>;
  /**
   * Changes a proposal this transaction locked (`lockProposal`, `lockProposalWithContext`), given
   * as it was read under the lock; returns the row as the transaction's changes of it so far leave
   * it (every patch of one row in one transaction is merged into one update). The update goes
   * out with the buffered rows, before the commit: under the lock nobody else changes the row, so
   * the caller knows what it becomes without a round trip, and nothing in the transaction reads it
   * from the database again.
   */
  updateProposal(locked: ProposalRecord, patch: ProposalPatch): ProposalRecord;
  /**
   * `updateProposal` only while the proposal is `executing` with no result recorded, checked by the
   * update itself under its row lock (as a lock and a read would, one round trip fewer); null when
   * it is no longer (another replica finished a claim it took over first).
   */
  updateExecutingProposal(id: string, patch: ProposalPatch): Promise<ProposalRecord | null>;
  /**
   * `updateExecutingProposal` without waiting for it: it goes out first in the statement of the
   * transaction's buffered rows, and those rows are written only if it matched. The work goes on
   * with the row as the update leaves it, which the caller knows: the update matches only while the
   * proposal is `executing` with no result and `executionAttempts` as given (no other replica took
   * the claim over). If it matched nothing, the transaction writes nothing and throws
   * `NoLongerExecutingError`. A remote result is then one statement, with no BEGIN or COMMIT.
   */
  finishExecutingProposal(id: string, executionAttempts: number, patch: ProposalPatch): void;
  /**
   * Completes the running outbox job that made this change (a stored click deciding), in the
   * transaction's statement, fenced by its claim stamp like any completion: the job is done exactly
   * when its decision is durable, with no statement of its own. Only in a transaction that began (a
   * lock); the answer comes once the transaction committed.
   */
  completeJob(job: JobClaim, at: Date): Promise<JobCompletion>;
  /**
   * Adds an approval, with the buffered rows, under the proposal's row lock and once its approvals
   * were read under it (`lockProposalWithContext`): the caller has checked that this approver is
   * not counted yet, and the lock keeps that true until the commit. An approval the database
   * already holds fails the transaction.
   */
  addApproval(approval: ApprovalRecord): void;
  listApprovals(proposalId: string): Promise<ApprovalRecord[]>;
  getAgent(id: string): Promise<AgentRecord | null>;
  insertAgent(agent: AgentRecord): Promise<void>;
  revokeAgent(id: string, at: Date): Promise<void>;
  appendAudit(event: AuditEventInput, at: Date): Promise<void>;
  /** Queues outbox jobs; they run only if this transaction commits. */
  enqueue(jobs: OutboxJobSpec[], at: Date): Promise<void>;
  /** Wakes long-polls of this proposal on every replica once the transaction commits. */
  notifyChange(proposalId: string): Promise<void>;
  /**
   * Locks the agent's row until the transaction ends (so one agent's concurrent proposals queue here,
   * other agents' do not) and counts its proposals still waiting at `now`, counting no further than `atMost`.
   */
  lockAgentAndCountWaiting(agentId: string, now: Date, atMost: number): Promise<number>;
  /** Proposals of this agent and operation created after `since`, other than `exceptId` (policy `count_last`). */
  countRecentProposals(agentId: string, operation: string, since: Date, exceptId: string): Promise<number>;
  grants: GrantTransaction;
  /**
   * Begins the transaction now, if no statement has yet: the store begins one only when the work
   * first needs it, and work made only of added rows commits as one statement with no BEGIN. Called
   * before something that must not happen unless the database is there (an in-process executor).
   */
  begin(): Promise<void>;
}

export interface LockedProposal {
  proposal: ProposalRecord;
  agent: AgentRecord | null;
  approvals: ApprovalRecord[];
  /** A request identity maps to it whose agent has not yet been answered with its final outcome. */
  unseenRequest: boolean;
}

/**
 * Work for the outbox: delivered after commit, retried with backoff until done or dead. The kind
 * and its payload come from the job catalogue (jobs.ts): a payload of another kind's shape does not
 * compile.
 */
export type OutboxJobSpec = {
  [K in JobKind]: {
    kind: K;
    payload: JobPayloadInputs[K];
    /**
     * The job is the first of its ordering key, queued by the transaction that makes what the key
     * names (a new proposal's first post): no job of the key can come before it, so a worker of this
     * process may take it as it is inserted (claimed by the insert) and run it once the transaction
     * committed, with `known`, what it would otherwise read first (src/outbox/README.md, "Taken as
     * queued"). Without a free slot here it is queued as any job, and `known` is dropped.
     */
    firstOfItsKey?: { known: JobKnownState<K> };
  };
}[JobKind] &
  OutboxJobOptions;

export interface OutboxJobOptions {
  /** Jobs sharing a key run one at a time, in the order they were queued. */
  orderingKey?: string;
  maxAttempts?: number;
  /**
   * Not queued when a job of the same kind and key is still waiting to start: for jobs that act on
   * the state they read when they run (a chat edit renders the proposal as it is then), that one
   * job covers this change too. Needs `orderingKey`.
   */
  coalesce?: boolean;
  /** Not before this instant (reminders, escalations); default: as soon as the transaction commits. */
  runAt?: Date;
}

export interface ProposalFilter {
  status?: ProposalStatus;
  agentId?: string;
  operation?: string;
  limit?: number;
}

/**
 * With `afterSeq`: the chain, integrated rows only, in `seq` order. Without: every row (placed in
 * the chain or not yet), in insert order.
 */
export interface AuditQuery {
  afterSeq?: number;
  proposalId?: string;
  limit?: number;
}

export interface Store {
  transaction<T>(work: (tx: StoreTransaction) => Promise<T>): Promise<T>;
  getProposal(id: string): Promise<ProposalRecord | null>;
  /**
   * The proposal and its approvals (oldest first), in one round trip; `unseenRequest` when a request
   * identity maps to it whose agent has not yet been answered with its final outcome.
   */
  getProposalWithApprovals(id: string): Promise<{ proposal: ProposalRecord; approvals: ApprovalRecord[]; unseenRequest?: boolean } | null>;
  /** Its agent was answered with the proposal's final outcome (see src/core/request-identity.ts). */
  markRequestSeen(proposalId: string, at: Date): Promise<void>;
  listProposals(filter: ProposalFilter): Promise<ProposalRecord[]>;
  listApprovals(proposalId: string): Promise<ApprovalRecord[]>;
  /** Executions whose claim ran out: their process died mid-call. */
  listStaleExecutions(now: Date, limit: number): Promise<ProposalRecord[]>;
  /** Pending proposals whose expiry has passed, oldest first. */
  listExpiredPending(now: Date, limit: number): Promise<ProposalRecord[]>;
  getAgent(id: string): Promise<AgentRecord | null>;
  findAgentByName(name: string): Promise<AgentRecord | null>;
  findAgentByKeyHash(keyHash: string): Promise<AgentRecord | null>;
  listAgents(): Promise<AgentRecord[]>;
  listAudit(query: AuditQuery): Promise<AuditEventRecord[]>;
  countProposalsByStatus(): Promise<Record<string, number>>;
  /** Commits a write (this replica's readiness row): readiness is the ability to write, not only to answer. */
  probeWrite(): Promise<void>;
}

export type IdentityClaim = { claimed: true } | { claimed: false; proposalId: string | null; sealedToken: unknown };

/** Which proposal answers a request identity (src/core/request-identity.ts); src/db/request-identity-store.ts implements it. */
export interface RequestIdentityStore {
  /**
   * Takes the identity's key unless a proposal still answers it or another caller is proposing right
   * now (until `now + claimMs`). One statement, so two replicas racing on one key cannot both win.
   */
  claim(key: string, agentId: string, now: Date, claimMs: number): Promise<IdentityClaim>;
  /** The proposal made under a claim; `seen` when the caller is answered with its final outcome already. */
  record(key: string, made: { proposalId: string; sealedToken: Record<string, unknown> | null; seen: boolean }, now: Date): Promise<void>;
  /** Gives the key back after a failed proposal, so the next call need not wait for the claim to run out. */
  release(key: string): Promise<void>;
}

/** A transaction's `finishExecutingProposal` matched nothing: the proposal is no longer as its claim left it. Nothing was written. */
export class NoLongerExecutingError extends Error {
  override readonly name = 'NoLongerExecutingError';
  constructor(readonly proposalId: string) {
    super(`proposal ${proposalId} is no longer executing under this claim`);
  }
}
