import { countedApprovers } from './decision-preview.js';
import { TwokeyError } from './errors.js';
import type { ExecutionRequest, ExecutorResolver } from './executor.js';
import { isAutomaticDecider, operationFor, type AgentRecord, type ApprovalRecord, type AuditEventInput, type Clock, type ProposalRecord } from './model.js';
import { noPeople, type People } from './people.js';
import { NoLongerExecutingError, type LockedProposal, type Store, type StoreTransaction } from './ports.js';
import { digestsEqual, paramsHash, sha256Hex } from './secrets.js';
import { failedTokenCheck } from './token-checks.js';
import { applyStep, committedAudit, committedPatch, committedStep, failedStep, leasedStep, recordCommitted, type ExecutionStep } from './execution-steps.js';
import { noTracer, type CommitSpan, type Tracer } from './tracer.js';
import { agentActor, type Transitions } from './transitions.js';

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
  /** Records each commit and executor call; nothing is recorded without it. */
  tracer?: Tracer;
}

export interface CommitClaim {
  operation: string;
  params: unknown;
}

interface ExecutionTrigger {
  actor: string;
  commit?: { agent: AgentRecord; token: string; claim: CommitClaim };
}

/**
 * A proposal as its execution left it, with the approvals its claim read (none can be added since).
 * `replayed`: the commit had already happened, and this is its stored result, with nothing run again.
 */
export interface Executed {
  proposal: ProposalRecord;
  approvals: ApprovalRecord[];
  replayed: boolean;
}

type Claimed =
  | { done: true; proposal: ProposalRecord; approvals: ApprovalRecord[]; replayed: boolean }
  | { done: false; request: ExecutionRequest; proposal: ProposalRecord; approvals: ApprovalRecord[]; unseenRequest: boolean };

/**
 * The proposal under this process's execution claim, and what was read with it under the row lock:
 * its approvals (they no longer change once it is approved) and, where it was read
 * (`LockedProposal.unseenRequest`), whether a request identity waits for its agent's final answer.
 * With both, each change of the execution is announced with its snapshot (src/core/changes.ts):
 * an agent waiting for it is answered without reading the proposal back.
 */
interface HeldClaim {
  proposal: ProposalRecord;
  approvals: readonly ApprovalRecord[];
  unseenRequest?: boolean;
}

/** What `announce` is told with a change of a held claim's proposal, when the claim read all of it. */
const knownOf = (claim: HeldClaim) => (claim.unseenRequest === undefined ? undefined : { approvals: claim.approvals, unseenRequest: claim.unseenRequest });

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

function checkToken(proposal: ProposalRecord | null, token: string): asserts proposal is ProposalRecord {
  if (!proposal || !digestsEqual(sha256Hex(token), proposal.tokenHash)) {
    throw new TwokeyError('invalid_token', 'the confirmation token is not valid for this proposal');
  }
}

/**
 * The request that consumed the token, asked again: the same agent, operation and params, on a
 * committed proposal (the agent's connection died after the commit, or it retried a commit it
 * thought lost). Anyone else holding the token — another agent, other params — learns only that it
 * was consumed, never the result.
 */
const repeatsTheCommit = (proposal: ProposalRecord, agent: AgentRecord, claim: CommitClaim): boolean =>
  proposal.status === 'committed' &&
  proposal.agentId === agent.id &&
  claim.operation === proposal.operation &&
  paramsHash(claim.params) === proposal.paramsHash;

/**
 * The commit checks, in the order every token is checked (src/core/token-checks.ts), each with its
 * own code, then the proposal's status; 'replay' when the commit has already happened and this is
 * the same request again. Runs under the proposal's row lock, so nothing can change between the
 * checks and the consumption.
 */
function checkCommitClaim(proposal: ProposalRecord, agent: AgentRecord, claim: CommitClaim, now: Date): 'run' | 'replay' {
  const failed = failedTokenCheck(
    proposal,
    {
      heldByCaller: (held) => held.agentId === agent.id,
      bindingMismatch: (held) =>
        claim.operation !== held.operation ? 'operation_mismatch' : paramsHash(claim.params) !== held.paramsHash ? 'params_mismatch' : null,
    },
    now,
  );
  switch (failed) {
    case null:
      break;
    case 'invalid_token':
      throw new TwokeyError('invalid_token', 'the confirmation token is not valid for this proposal');
    case 'principal_mismatch':
      throw new TwokeyError('principal_mismatch', 'the confirmation token was issued to another agent');
    case 'consumed':
      if (repeatsTheCommit(proposal, agent, claim)) return 'replay';
      throw new TwokeyError('consumed', 'the confirmation token was already consumed');
    case 'expired':
      throw new TwokeyError('expired', `the confirmation token expired at ${proposal.expiresAt.toISOString()}`);
    case 'operation_mismatch':
      throw new TwokeyError('operation_mismatch', `the confirmation token is for operation "${proposal.operation}"`);
    case 'params_mismatch':
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
  return 'run';
}

/** Claims on remote executors last this long when the operation does not say. */
const DEFAULT_LEASE_MS = 60_000;

const leaseMsFor = (deps: ExecutionDeps, operation: string): number => deps.executionLeaseMs?.(operation) ?? DEFAULT_LEASE_MS;

const isAutomaticallyApproved = (proposal: ProposalRecord): boolean =>
  isAutomaticDecider(proposal.decidedBy) && (proposal.status === 'approved' || proposal.status === 'executing');

/** What the executor is told: the proposal and the people (one identity each) whose approvals count. */
function requestFor(deps: ExecutionDeps, proposal: ProposalRecord, agent: AgentRecord, approvals: readonly ApprovalRecord[], now: Date): ExecutionRequest {
  const operation = operationFor(proposal, deps.transitions.requireOperation(proposal.operation));
  const counted = countedApprovers(approvals, operation, agent.owners, deps.people ?? noPeople);
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

/** The executor's request, once the approvals that still count reach the quorum (or a rule or grant decided). */
function approvedRequest(deps: ExecutionDeps, proposal: ProposalRecord, agent: AgentRecord, approvals: readonly ApprovalRecord[], now: Date): ExecutionRequest {
  const request = requestFor(deps, proposal, agent, approvals, now);
  if (!isAutomaticallyApproved(proposal) && request.approvedBy.length < proposal.quorum) {
    throw new TwokeyError('not_approved', `${request.approvedBy.length} of ${proposal.quorum} approvals still count`);
  }
  return request;
}

/** The executor call, as the commit span's child: a downstream receives that span's trace context. */
function runExecutor(deps: ExecutionDeps, span: CommitSpan, request: ExecutionRequest): Promise<unknown> {
  const executor = deps.executorFor(request.operation);
  return span.execute(request, executor.kind, () => executor.run(request));
}

/**
 * The claim, under the proposal's row lock: the checks, then either a lease for a remote executor
 * (run after this transaction commits) or, for a local one, the run itself and its result.
 */
async function claimAndMaybeRun(deps: ExecutionDeps, tx: StoreTransaction, proposalId: string, trigger: ExecutionTrigger, span: CommitSpan): Promise<Claimed> {
  const now = deps.clock();
  const locked = await tx.lockProposalWithContext(proposalId);
  const proposal = locked?.proposal ?? null;
  span.begin(proposal);
  if (trigger.commit) {
    checkToken(proposal, trigger.commit.token);
    // A replay writes nothing: the answer is what the commit stored.
    if (checkCommitClaim(proposal, trigger.commit.agent, trigger.commit.claim, now) === 'replay') {
      return { done: true, proposal, approvals: locked?.approvals ?? [], replayed: true };
    }
  } else if (!proposal) {
    throw new TwokeyError('not_found', `no proposal ${proposalId}`);
  } else if (proposal.status !== 'approved') {
    throw new TwokeyError('not_pending', `proposal ${proposal.id} is ${proposal.status}, not approved`);
  }
  const agent = locked?.agent;
  if (!agent) throw new TwokeyError('internal', 'proposal without agent');
  const approvals = locked.approvals;
  const request = approvedRequest(deps, proposal, agent, approvals, now);
  const executor = deps.executorFor(proposal.operation);
  if (executor.kind === 'remote') {
    return { done: false, unseenRequest: locked.unseenRequest, ...(await leaseForRemote(deps, tx, proposal, request, approvals, trigger.actor, now)) };
  }
  const result = await runExecutor(deps, span, request).catch((error: unknown) => {
    throw new ExecutionFailure(describeFailure(error));
  });
  return {
    done: true,
    proposal: await deps.transitions.settle(tx, await recordCommitted(tx, proposal, result, trigger.actor, now)),
    approvals,
    replayed: false,
  };
}

/** The claim of a remote execution: a lease, one more attempt, `execution.started`. The call runs after commit. */
async function leaseForRemote(
  deps: ExecutionDeps,
  tx: StoreTransaction,
  proposal: ProposalRecord,
  request: ExecutionRequest,
  approvals: ApprovalRecord[],
  actor: string,
  now: Date,
) {
  const executing = await applyStep(tx, proposal, leasedStep(proposal, leaseMsFor(deps, proposal.operation), actor, now), now);
  return { request, proposal: await deps.transitions.settle(tx, executing), approvals };
}

/** The claim `planClaimWhenApproved` plans: its step, written with the approval, and the claim once it is. */
export interface ClaimPlan {
  step: ExecutionStep;
  claimOf(executing: ProposalRecord): ApprovedClaim;
}

/** A remote execution claimed in the transaction that approved the proposal; it runs once that transaction has committed. */
export interface ApprovedClaim extends HeldClaim {
  /** The proposal as the decision left it (approved). */
  approved: ProposalRecord;
  /** The proposal under its execution lease. */
  proposal: ProposalRecord;
  request: ExecutionRequest;
  approvals: ApprovalRecord[];
}

/**
 * An execution begun at propose time (`executeAtPropose`): the row to insert and the audit rows that
 * follow the decision's; after the insert has committed, `finish`, given the row as stored, runs
 * what is left (a remote call and its result) and answers the proposal as it then stands.
 */
export interface ExecutionAtPropose {
  proposal: ProposalRecord;
  audit: Array<{ event: AuditEventInput; at: Date }>;
  finish(stored: ProposalRecord): Promise<ProposalRecord>;
  /** The transaction did not commit: nothing of this execution was recorded. */
  abandon(error: unknown): void;
}

async function recordFailure(deps: ExecutionDeps, proposalId: string, message: string, actor: string): Promise<ProposalRecord | null> {
  const now = deps.clock();
  return deps.store.transaction(async (tx) => {
    const proposal = await tx.lockProposal(proposalId);
    if (!proposal || (proposal.status !== 'approved' && proposal.status !== 'executing')) return null;
    return deps.transitions.settle(tx, await applyStep(tx, proposal, failedStep(proposal, message, actor, now), now));
  });
}

/** Records the failure of the side effect, then refuses with `execution_failed`. */
async function failed(deps: ExecutionDeps, proposalId: string, message: string, actor: string): Promise<never> {
  const recorded = await recordFailure(deps, proposalId, message, actor);
  if (recorded) deps.transitions.announce(recorded);
  throw new TwokeyError('execution_failed', `execution failed: ${message}`);
}

/**
 * The run of a committed remote claim, and its result recorded in a transaction of its own. Given the
 * row as its claim stored it (`held`), the result is one statement: its update goes out with its
 * audit row and jobs, which are added only if the update matched, and the proposal is the claimed
 * row as that update leaves it, announced with the claim's snapshot when it has one. It matches
 * nothing only if the claim is no longer this one (another replica took an expired claim over):
 * then, as without `held`, one result only.
 */
async function finishRemote(deps: ExecutionDeps, request: ExecutionRequest, actor: string, span: CommitSpan, held?: HeldClaim): Promise<ProposalRecord> {
  let result: unknown;
  try {
    result = await runExecutor(deps, span, request);
  } catch (error) {
    return failed(deps, request.proposalId, describeFailure(error), actor);
  }
  const now = deps.clock();
  if (held?.proposal.status === 'executing') {
    const claimed = held.proposal;
    const patch = committedPatch(result, now);
    const recorded = await deps.store
      .transaction(async (tx) => {
        tx.finishExecutingProposal(claimed.id, claimed.executionAttempts, patch);
        const finished: ProposalRecord = { ...claimed, ...patch };
        await tx.appendAudit(committedAudit(finished, result, actor), now);
        return deps.transitions.settle(tx, finished);
      })
      .catch((error: unknown) => {
        if (error instanceof NoLongerExecutingError) return null;
        throw error;
      });
    // The claim's approvals still stand: nothing adds one to an executing proposal.
    if (recorded) return deps.transitions.announce(recorded, knownOf(held));
  }
  const proposal = await deps.store.transaction(async (tx) => {
    // Another replica may have recovered an expired claim and finished first: one result only. The
    // update records it only while the proposal is still executing without a result, and takes the
    // row lock itself: no lock and read before it. An executing proposal's attempt was counted by its
    // claim, so the patch needs nothing read from the row.
    const finished = await tx.updateExecutingProposal(request.proposalId, committedPatch(result, now));
    if (finished) {
      await tx.appendAudit(committedAudit(finished, result, actor), now);
      return deps.transitions.settle(tx, finished);
    }
    const current = await tx.lockProposal(request.proposalId);
    if (!current) throw new TwokeyError('internal', 'proposal vanished during execution');
    return deps.transitions.settle(tx, current);
  });
  return deps.transitions.announce(proposal);
}

/** Claims a stale execution again (a new lease, one more attempt); null when it is no longer stale. */
async function reclaim(deps: ExecutionDeps, tx: StoreTransaction, proposalId: string, now: Date, span: CommitSpan): Promise<ExecutionRequest | null> {
  const current = await tx.lockProposal(proposalId);
  if (!current || current.status !== 'executing' || (current.leaseUntil && current.leaseUntil.getTime() > now.getTime())) return null;
  const agent = await tx.getAgent(current.agentId);
  if (!agent || !deps.transitions.operationExists(current.operation)) return null;
  const approvals = await tx.listApprovals(current.id);
  span.begin(current);
  tx.updateProposal(current, {
    leaseUntil: new Date(now.getTime() + leaseMsFor(deps, current.operation)),
    executionAttempts: current.executionAttempts + 1,
    updatedAt: now,
  });
  await tx.appendAudit(
    { type: 'execution.resumed', actor: 'system', proposalId: current.id, agentId: current.agentId, data: { attempt: current.executionAttempts + 1 } },
    now,
  );
  return requestFor(deps, current, agent, approvals, now);
}

/** Ends the commit span with the proposal's status, or failed with the error's code. */
async function traced<T extends ProposalRecord | Executed>(span: CommitSpan, work: () => Promise<T>): Promise<T> {
  try {
    const done = await work();
    span.end({ status: 'proposal' in done ? done.proposal.status : done.status });
    return done;
  } catch (error) {
    span.end({ error });
    throw error;
  }
}

export function createExecutionPipeline(deps: ExecutionDeps) {
  const { store, clock } = deps;
  const tracer = deps.tracer ?? noTracer;

  async function runExecution(proposalId: string, trigger: ExecutionTrigger): Promise<Executed> {
    const span = tracer.commit(proposalId);
    return traced(span, async () => {
      let claimed: Claimed;
      try {
        claimed = await store.transaction((tx) => claimAndMaybeRun(deps, tx, proposalId, trigger, span));
      } catch (error) {
        if (!(error instanceof ExecutionFailure)) throw error;
        return failed(deps, proposalId, error.causeMessage, trigger.actor);
      }
      if (claimed.done) {
        // A replay changed nothing: there is nothing to tell.
        if (!claimed.replayed) deps.transitions.announce(claimed.proposal);
        return { proposal: claimed.proposal, approvals: claimed.approvals, replayed: claimed.replayed };
      }
      deps.transitions.announce(claimed.proposal, knownOf(claimed));
      return { proposal: await finishRemote(deps, claimed.request, trigger.actor, span, claimed), approvals: claimed.approvals, replayed: false };
    });
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

  /**
   * The claim of a proposal that a transaction is approving, planned before the approval is written:
   * that transaction holds the row lock and has read the approvals, so the claim needs no
   * transaction, lock or read of its own, and its patch goes into the approval's own update (one
   * write of the row for both). `claimOf` is given the row as that update left it. Only for a remote
   * executor; null for a local one, whose run and result share a transaction of their own
   * (`executeApproved`), so that a failed run cannot undo the approval.
   */
  function planClaimWhenApproved(
    approved: ProposalRecord,
    agent: AgentRecord,
    locked: Pick<LockedProposal, 'approvals' | 'unseenRequest'>,
    actor: string,
    now: Date,
  ): ClaimPlan | null {
    const { approvals, unseenRequest } = locked;
    if (approved.status !== 'approved' || deps.executorFor(approved.operation).kind !== 'remote') return null;
    const request = approvedRequest(deps, approved, agent, approvals, now);
    return {
      step: leasedStep(approved, leaseMsFor(deps, approved.operation), actor, now),
      claimOf: (executing) => ({ approved, proposal: executing, request, approvals, unseenRequest }),
    };
  }

  /** Runs what `planClaimWhenApproved` claimed, after its transaction committed: the executor call and its result. */
  async function runApprovedClaim(claim: ApprovedClaim, actor: string, begun?: CommitSpan): Promise<ProposalRecord> {
    const span = begun ?? tracer.commit(claim.proposal.id);
    if (!begun) span.begin(claim.approved);
    deps.transitions.announce(claim.proposal, knownOf(claim));
    return traced(span, () => finishRemote(deps, claim.request, actor, span, claim));
  }

  /**
   * The execution of a proposal that a policy rule or a grant has just approved (`commit: on_approve`),
   * begun in the transaction that inserts it, before the insert: nobody else can see the proposal
   * yet, so it needs no row lock and no claim transaction of its own, and its row is written once,
   * with the execution's state and the same fields and audit rows as the steps above. A local
   * executor runs here, as it would under the claim's lock, and its result (or its failure: approved,
   * with the error) goes into the row. A remote one is claimed here (a lease, `execution.started`)
   * and runs once the transaction has committed (`finish`), its result recorded in a transaction of
   * its own; a crash in between leaves an expired lease that `resumeStaleExecutions` takes over with
   * the same idempotency key, the proposal id. A read-only remote one (`Executor.readOnly`) needs
   * no claim: it runs here, before anything is sent, and its row and result go out as one statement.
   */
  async function executeAtPropose(
    tx: Pick<StoreTransaction, 'begin'>,
    approved: ProposalRecord,
    agent: AgentRecord,
    actor: string,
  ): Promise<ExecutionAtPropose> {
    const now = clock();
    const request = approvedRequest(deps, approved, agent, [], now);
    const span = tracer.commit(approved.id);
    span.begin(approved);
    const executor = deps.executorFor(approved.operation);
    if (executor.kind === 'remote' && !executor.readOnly) {
      const step = leasedStep(approved, leaseMsFor(deps, approved.operation), actor, now);
      const executing = { ...approved, ...step.patch };
      return {
        proposal: executing,
        audit: [{ event: step.audit, at: now }],
        finish: (stored) => runApprovedClaim({ approved, proposal: stored, request, approvals: [] }, actor, span),
        abandon: (error) => span.end({ error }),
      };
    }
    // The transaction that records this run begins before it: an in-process side effect must not
    // happen when the database is already out of reach (the record would then surely be lost). A
    // read changes nothing, so its record waits for it, and goes out as one statement after it. It
    // holds nothing while it runs: a standing rule decides a read-only tool without a statement, so
    // no transaction is open yet (test/mcp/statement-counts.test.ts counts none).
    if (!executor.readOnly) await tx.begin();
    let step: ExecutionStep;
    try {
      step = committedStep(approved, await runExecutor(deps, span, request), actor, now);
    } catch (error) {
      step = failedStep(approved, describeFailure(error), actor, now);
    }
    const executed = { ...approved, ...step.patch };
    return {
      proposal: executed,
      audit: [{ event: step.audit, at: now }],
      finish: async (stored) => {
        span.end({ status: stored.status });
        return stored;
      },
      abandon: (error) => span.end({ error }),
    };
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
      const span = tracer.commit(stale.id);
      const request = await store
        .transaction((tx) => reclaim(deps, tx, stale.id, now, span))
        .catch((error: unknown) => {
          span.end({ error });
          throw error;
        });
      // No longer stale (another replica took it over): no span was started.
      if (!request) continue;
      resumed += 1;
      await traced(span, () => finishRemote(deps, request, 'system', span)).catch((error: unknown) => {
        if (!(error instanceof TwokeyError && error.code === 'execution_failed')) throw error;
      });
    }
    return resumed;
  }

  return { commit, commitWithApprovals, executeApproved, planClaimWhenApproved, runApprovedClaim, executeAtPropose, resumeStaleExecutions };
}

export type ExecutionPipeline = ReturnType<typeof createExecutionPipeline>;
