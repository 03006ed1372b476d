import { countedApprovers } from './decision-preview.js';
import { TwokeyError } from './errors.js';
import type { ExecutionRequest, ExecutorResolver } from './executor.js';
import { isAutomaticDecider, operationFor, type AgentRecord, type ApprovalRecord, type Clock, type ProposalRecord } from './model.js';
import { noPeople, type People } from './people.js';
import type { Store, StoreTransaction } from './ports.js';
import { digestsEqual, paramsHash, sha256Hex } from './secrets.js';
import { agentActor, type Transitions } from './transitions.js';
import { ATTRIBUTES, SPANS, deferredProposalSpan, type DeferredProposalSpan } from '../tracing/index.js';

/**
 * The execution pipeline of an approved proposal: claim it under the row lock, run the executor,
 * record the result or the failure, and resume claims whose process died. Local executors run inside
 * the claiming transaction (token consumption and side effect commit together); remote ones run after
 * a committed claim with a lease, and their result is recorded in a second transaction.
 */
export interface ExecutionDeps {
  store: Store;
  clock: Clock;
  executorFor: ExecutorResolver;
  transitions: Transitions;
  people?: People;
  /**
   * How long an execution claim on a remote executor lasts before recovery may take it over; longer
   * than the executor's own timeout, so a live call is never taken over.
   */
  executionLeaseMs?(operation: string): number;
}

export interface CommitClaim {
  operation: string;
  params: unknown;
}

interface ExecutionTrigger {
  actor: string;
  commit?: { agent: AgentRecord; token: string; claim: CommitClaim };
}

/** A proposal as its execution left it, with the approvals its claim read (none can be added since). */
export interface Executed {
  proposal: ProposalRecord;
  approvals: ApprovalRecord[];
}

type Claimed =
  | { done: true; proposal: ProposalRecord; approvals: ApprovalRecord[] }
  | { done: false; request: ExecutionRequest; proposal: ProposalRecord; approvals: ApprovalRecord[] };

/** Marks a failure of the side effect itself, as opposed to a refused commit. */
class ExecutionFailure extends Error {
  constructor(readonly causeMessage: string) {
    super(causeMessage);
  }
}

function describeFailure(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.slice(0, 1000) || 'executor failed';
}

/**
 * The commit checks, in the documented order, each with its own code. Runs under the proposal's
 * row lock, so nothing can change between the checks and the consumption.
 */
function checkCommitClaim(
  proposal: ProposalRecord | null,
  agent: AgentRecord,
  token: string,
  claim: CommitClaim,
  now: Date,
): asserts proposal is ProposalRecord {
  if (!proposal || !digestsEqual(sha256Hex(token), proposal.tokenHash)) {
    throw new TwokeyError('invalid_token', 'the confirmation token is not valid for this proposal');
  }
  if (proposal.consumedAt) throw new TwokeyError('consumed', 'the confirmation token was already consumed');
  if (now.getTime() >= proposal.expiresAt.getTime()) {
    throw new TwokeyError('expired', `the confirmation token expired at ${proposal.expiresAt.toISOString()}`);
  }
  if (proposal.agentId !== agent.id) {
    throw new TwokeyError('principal_mismatch', 'the confirmation token was issued to another agent');
  }
  if (claim.operation !== proposal.operation) {
    throw new TwokeyError('operation_mismatch', `the confirmation token is for operation "${proposal.operation}"`);
  }
  if (paramsHash(claim.params) !== proposal.paramsHash) {
    throw new TwokeyError('params_mismatch', 'params differ from the proposed params');
  }
  if (proposal.status === 'rejected') {
    throw new TwokeyError('rejected', `the proposal was rejected${proposal.decisionReason ? `: ${proposal.decisionReason}` : ''}`);
  }
  if (proposal.status === 'executing') {
    throw new TwokeyError('conflict', 'the proposal is being executed right now');
  }
  if (proposal.status !== 'approved') {
    throw new TwokeyError('not_approved', `the proposal is ${proposal.status}, not approved`);
  }
}

/** The side effect happened: the token is consumed, the result kept, the claim released. */
async function recordCommitted(tx: StoreTransaction, proposal: ProposalRecord, result: unknown, actor: string, now: Date): Promise<ProposalRecord> {
  const committed = await tx.updateProposal(proposal.id, {
    status: 'committed',
    consumedAt: now,
    result: result ?? null,
    error: null,
    leaseUntil: null,
    executionAttempts: proposal.status === 'executing' ? proposal.executionAttempts : proposal.executionAttempts + 1,
    updatedAt: now,
  });
  await tx.appendAudit({ type: 'proposal.committed', actor, proposalId: proposal.id, agentId: proposal.agentId, data: { result: result ?? null } }, now);
  return committed;
}

const isAutomaticallyApproved = (proposal: ProposalRecord): boolean =>
  isAutomaticDecider(proposal.decidedBy) && (proposal.status === 'approved' || proposal.status === 'executing');

export function createExecutionPipeline(deps: ExecutionDeps) {
  const { store, clock, transitions } = deps;
  const { settle, announce } = transitions;
  const people = deps.people ?? noPeople;
  const leaseMs = (operation: string) => deps.executionLeaseMs?.(operation) ?? 60_000;

  /** What the executor is told: the proposal and the people (one identity each) whose approvals count. */
  function requestFor(proposal: ProposalRecord, agent: AgentRecord, approvals: readonly ApprovalRecord[], now: Date): ExecutionRequest {
    const operation = operationFor(proposal, transitions.requireOperation(proposal.operation));
    const counted = countedApprovers(approvals, operation, agent.owners, people);
    // A policy rule or a grant decided it at propose time: that recorded decision is the approval.
    const approvedBy = isAutomaticallyApproved(proposal) && counted.length === 0 ? [proposal.decidedBy as string] : counted;
    return {
      proposalId: proposal.id,
      operation: proposal.operation,
      params: proposal.params,
      agent: agent.name,
      approvedBy,
      approvedAt: (proposal.decidedAt ?? now).toISOString(),
    };
  }

  /** The executor call, as the commit span's child: a downstream receives that span's trace context. */
  function runExecutor(span: DeferredProposalSpan, request: ExecutionRequest): Promise<unknown> {
    const executor = deps.executorFor(request.operation);
    return span.child(
      SPANS.execute,
      { [ATTRIBUTES.proposalId]: request.proposalId, [ATTRIBUTES.operation]: request.operation, [ATTRIBUTES.executorKind]: executor.kind },
      () => executor.run(request),
    );
  }

  async function claimAndMaybeRun(tx: StoreTransaction, proposalId: string, trigger: ExecutionTrigger, span: DeferredProposalSpan): Promise<Claimed> {
    const now = clock();
    const locked = await tx.lockProposalWithContext(proposalId);
    const proposal = locked?.proposal ?? null;
    span.begin(proposal);
    if (trigger.commit) {
      checkCommitClaim(proposal, trigger.commit.agent, trigger.commit.token, trigger.commit.claim, now);
    } else if (!proposal) {
      throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    } else if (proposal.status !== 'approved') {
      throw new TwokeyError('not_pending', `proposal ${proposal.id} is ${proposal.status}, not approved`);
    }
    const agent = locked?.agent;
    if (!agent) throw new TwokeyError('internal', 'proposal without agent');
    const approvals = locked.approvals;
    const request = requestFor(proposal, agent, approvals, now);
    if (!isAutomaticallyApproved(proposal) && request.approvedBy.length < proposal.quorum) {
      throw new TwokeyError('not_approved', `${request.approvedBy.length} of ${proposal.quorum} approvals still count`);
    }
    const executor = deps.executorFor(proposal.operation);
    if (executor.kind === 'remote') {
      const executing = await tx.updateProposal(proposal.id, {
        status: 'executing',
        leaseUntil: new Date(now.getTime() + leaseMs(proposal.operation)),
        executionAttempts: proposal.executionAttempts + 1,
        updatedAt: now,
      });
      await tx.appendAudit({ type: 'execution.started', actor: trigger.actor, proposalId: proposal.id, agentId: agent.id, data: {} }, now);
      return { done: false, request, proposal: await settle(tx, executing), approvals };
    }
    const result = await runExecutor(span, request).catch((error: unknown) => {
      throw new ExecutionFailure(describeFailure(error));
    });
    return { done: true, proposal: await settle(tx, await recordCommitted(tx, proposal, result, trigger.actor, now)), approvals };
  }

  async function recordFailure(proposalId: string, message: string, actor: string): Promise<ProposalRecord | null> {
    const now = clock();
    return store.transaction(async (tx) => {
      const proposal = await tx.lockProposal(proposalId);
      if (!proposal || (proposal.status !== 'approved' && proposal.status !== 'executing')) return null;
      // Back to approved with the token unconsumed: the same proposal can be retried.
      const failed = await tx.updateProposal(proposal.id, {
        status: 'approved',
        error: message,
        leaseUntil: null,
        executionAttempts: proposal.status === 'executing' ? proposal.executionAttempts : proposal.executionAttempts + 1,
        updatedAt: now,
      });
      await tx.appendAudit({ type: 'execution.failed', actor, proposalId: proposal.id, agentId: proposal.agentId, data: { error: message } }, now);
      return settle(tx, failed);
    });
  }

  async function failed(proposalId: string, message: string, actor: string): Promise<never> {
    const recorded = await recordFailure(proposalId, message, actor);
    if (recorded) announce(recorded);
    throw new TwokeyError('execution_failed', `execution failed: ${message}`);
  }

  async function finishRemote(request: ExecutionRequest, actor: string, span: DeferredProposalSpan): Promise<ProposalRecord> {
    let result: unknown;
    try {
      result = await runExecutor(span, request);
    } catch (error) {
      return failed(request.proposalId, describeFailure(error), actor);
    }
    const now = clock();
    const proposal = await store.transaction(async (tx) => {
      const current = await tx.lockProposal(request.proposalId);
      if (!current) throw new TwokeyError('internal', 'proposal vanished during execution');
      // Another replica may have recovered an expired claim and finished first: one result only.
      const finished = current.status === 'executing' && !current.consumedAt ? await recordCommitted(tx, current, result, actor, now) : current;
      return settle(tx, finished);
    });
    return announce(proposal);
  }

  async function runExecution(proposalId: string, trigger: ExecutionTrigger): Promise<Executed> {
    const span = deferredProposalSpan(SPANS.commit, proposalId);
    return traced(span, async () => {
      let claimed: Claimed;
      try {
        claimed = await store.transaction((tx) => claimAndMaybeRun(tx, proposalId, trigger, span));
      } catch (error) {
        if (!(error instanceof ExecutionFailure)) throw error;
        return failed(proposalId, error.causeMessage, trigger.actor);
      }
      announce(claimed.proposal);
      if (claimed.done) return { proposal: claimed.proposal, approvals: claimed.approvals };
      return { proposal: await finishRemote(claimed.request, trigger.actor, span), approvals: claimed.approvals };
    });
  }

  /** Ends the commit span with the proposal's status, or failed with the error's code. */
  async function traced<T extends ProposalRecord | Executed>(span: DeferredProposalSpan, work: () => Promise<T>): Promise<T> {
    try {
      const done = await work();
      span.end({ status: 'proposal' in done ? done.proposal.status : done.status });
      return done;
    } catch (error) {
      span.end({ error });
      throw error;
    }
  }

  /** The agent's commit with its confirmation token, and the approvals, so the answer needs no re-read. */
  function commitWithApprovals(agent: AgentRecord, proposalId: string, token: string, claim: CommitClaim): Promise<Executed> {
    return runExecution(proposalId, { actor: agentActor(agent), commit: { agent, token, claim } });
  }

  /** The agent's commit with its confirmation token (`commit: agent` operations, or a retry). */
  async function commit(agent: AgentRecord, proposalId: string, token: string, claim: CommitClaim): Promise<ProposalRecord> {
    return (await commitWithApprovals(agent, proposalId, token, claim)).proposal;
  }

  /** Runs an approved proposal: the click that completed the quorum, or an operator's retry. */
  async function executeApproved(proposalId: string, actor: string): Promise<ProposalRecord> {
    return (await runExecution(proposalId, { actor })).proposal;
  }

  /** Claims a stale execution again (a new lease, one more attempt); null when it is no longer stale. */
  async function reclaim(tx: StoreTransaction, proposalId: string, now: Date, span: DeferredProposalSpan): Promise<ExecutionRequest | null> {
    const current = await tx.lockProposal(proposalId);
    if (!current || current.status !== 'executing' || (current.leaseUntil && current.leaseUntil.getTime() > now.getTime())) return null;
    const agent = await tx.getAgent(current.agentId);
    if (!agent || !transitions.operationExists(current.operation)) return null;
    const approvals = await tx.listApprovals(current.id);
    span.begin(current);
    await tx.updateProposal(current.id, {
      leaseUntil: new Date(now.getTime() + leaseMs(current.operation)),
      executionAttempts: current.executionAttempts + 1,
      updatedAt: now,
    });
    await tx.appendAudit(
      { type: 'execution.resumed', actor: 'system', proposalId: current.id, agentId: current.agentId, data: { attempt: current.executionAttempts + 1 } },
      now,
    );
    return requestFor(current, agent, approvals, now);
  }

  /**
   * Takes over executions whose process died while the executor held the request: claims them
   * again and re-invokes the executor with the same idempotency key (the proposal id), so the
   * downstream sees a repeat, not a second effect.
   */
  async function resumeStaleExecutions(limit = 20): Promise<number> {
    let resumed = 0;
    for (const stale of await store.listStaleExecutions(clock(), limit)) {
      const now = clock();
      const span = deferredProposalSpan(SPANS.commit, stale.id);
      const request = await store
        .transaction((tx) => reclaim(tx, stale.id, now, span))
        .catch((error: unknown) => {
          span.end({ error });
          throw error;
        });
      // No longer stale (another replica took it over): no span was started.
      if (!request) continue;
      resumed += 1;
      await traced(span, () => finishRemote(request, 'system', span)).catch((error: unknown) => {
        if (!(error instanceof TwokeyError && error.code === 'execution_failed')) throw error;
      });
    }
    return resumed;
  }

  return { commit, commitWithApprovals, executeApproved, resumeStaleExecutions };
}

export type ExecutionPipeline = ReturnType<typeof createExecutionPipeline>;
