import { TwokeyError } from './errors.js';
import type { ExecutionRequest, ExecutorResolver } from './executor.js';
import { newId } from './ids.js';
import type {
  AgentRecord,
  ApprovalRecord,
  Clock,
  Decider,
  OperationSpec,
  ProposalRecord,
} from './model.js';
import type { OutboxJobSpec, Store, StoreTransaction } from './ports.js';
import { digestsEqual, mintConfirmToken, paramsHash, sha256Hex } from './secrets.js';

export interface ProposalServiceDeps {
  store: Store;
  operation(name: string): OperationSpec | undefined;
  executorFor: ExecutorResolver;
  clock: Clock;
  /**
   * How long an execution claim on a remote executor lasts before recovery may take it over; longer
   * than the executor's own timeout, so a live call is never taken over.
   */
  executionLeaseMs?(operation: string): number;
  /** Called after every committed state change (long-poll wake-ups, metrics). Must not throw. */
  onChange?(proposal: ProposalRecord): void;
  /** The outbox jobs a proposal's new state calls for (chat edits, callbacks). */
  effects?(proposal: ProposalRecord): OutboxJobSpec[];
}

export interface ProposeInput {
  operation: string;
  params: unknown;
  callbackUrl?: string | null;
}

export interface CommitClaim {
  operation: string;
  params: unknown;
}

export type ApproveOutcome = 'counted' | 'already_counted' | 'quorum_reached';

export interface DecisionResult {
  outcome: ApproveOutcome | 'rejected';
  proposal: ProposalRecord;
}

const MAX_REASON_LENGTH = 500;

const agentActor = (agent: Pick<AgentRecord, 'name'>): string => `agent:${agent.name}`;

/** The approvers-list entry that lets this person decide, or null. */
export function matchApprover(approvers: readonly string[], decider: Decider): string | null {
  if (approvers.includes(decider.identity)) return decider.identity;
  return decider.memberOf?.find((group) => approvers.includes(group)) ?? null;
}

/**
 * The rule every channel applies before anyone decides: owners of the agent never, approvers only
 * (directly or through a group or role). Pure, so transports can answer a refused click at once
 * without a lock; the core applies it again under the row lock.
 */
export function deciderRefusal(
  operation: { name: string; approval: { approvers: readonly string[] } },
  agent: Pick<AgentRecord, 'name' | 'owners'>,
  decider: Decider,
): TwokeyError | null {
  if (agent.owners.includes(decider.identity)) {
    return new TwokeyError('owner_cannot_approve', `${decider.identity} owns agent "${agent.name}" and cannot decide on its proposals`);
  }
  if (!matchApprover(operation.approval.approvers, decider)) {
    return new TwokeyError('not_an_approver', `${decider.identity} is not an approver of "${operation.name}"`);
  }
  return null;
}

/**
 * Approvals that still count: their approvers-list entry is still configured and the approver is not
 * (or no longer allowed to be) an owner of the agent. Re-checked at commit, so a config change
 * between approval and commit cannot smuggle in a removed approver.
 */
export function countedApprovers(
  approvals: readonly ApprovalRecord[],
  operation: OperationSpec,
  owners: readonly string[],
): string[] {
  return approvals
    .filter((a) => operation.approval.approvers.includes(a.matchedRule) && !owners.includes(a.approver))
    .map((a) => a.approver);
}

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

export function createProposalService(deps: ProposalServiceDeps) {
  const { store, clock } = deps;
  const leaseMs = (operation: string) => deps.executionLeaseMs?.(operation) ?? 60_000;

  function requireOperation(name: string): OperationSpec {
    const operation = deps.operation(name);
    if (!operation) {
      throw new TwokeyError('operation_removed', `operation "${name}" is no longer in the configuration`);
    }
    return operation;
  }

  /**
   * Ends a state change inside its transaction: given the proposal as it now stands, queues what
   * must reach the outside (chat edits, callbacks) in the outbox and wakes long-polls on every
   * replica — all of it committed, or rolled back, with the change itself.
   */
  async function settle(tx: StoreTransaction, proposal: ProposalRecord): Promise<ProposalRecord> {
    const jobs = deps.effects?.(proposal) ?? [];
    if (jobs.length > 0) await tx.enqueue(jobs, clock());
    await tx.notifyChange(proposal.id);
    return proposal;
  }

  function announce(proposal: ProposalRecord): ProposalRecord {
    deps.onChange?.(proposal);
    return proposal;
  }

  async function propose(agent: AgentRecord, input: ProposeInput) {
    const operation = deps.operation(input.operation);
    if (!operation) throw new TwokeyError('unknown_operation', `unknown operation "${input.operation}"`);
    if (agent.operations && !agent.operations.includes(operation.name)) {
      throw new TwokeyError('operation_not_allowed', `agent "${agent.name}" may not propose "${operation.name}"`);
    }
    const problems = operation.validateParams(input.params);
    if (problems.length > 0) {
      throw new TwokeyError('invalid_params', `params do not match the schema of "${operation.name}"`, problems);
    }
    const params = input.params as Record<string, unknown>;
    const context = { agent: agent.name, operation: operation.name, params };
    // The server writes the summary: the human approves what twokey says, never what the agent says.
    const summary = operation.renderSummary(context);
    const now = clock();
    const confirmToken = mintConfirmToken();
    const proposal: ProposalRecord = {
      id: newId('prp'),
      agentId: agent.id,
      operation: operation.name,
      params,
      paramsHash: paramsHash(params),
      summary,
      summaryHash: sha256Hex(summary),
      cost: operation.renderCost?.(context) ?? null,
      confirmationType: operation.confirmationType,
      tokenHash: sha256Hex(confirmToken),
      status: 'pending',
      quorum: operation.approval.quorum,
      commitMode: operation.commit,
      callbackUrl: input.callbackUrl ?? null,
      createdAt: now,
      expiresAt: new Date(now.getTime() + operation.expiresInMs),
      consumedAt: null,
      decidedBy: null,
      decidedAt: null,
      decisionReason: null,
      result: null,
      error: null,
      executionAttempts: 0,
      leaseUntil: null,
      updatedAt: now,
    };
    const created = await store.transaction(async (tx) => {
      const stored = await tx.insertProposal(proposal);
      await tx.appendAudit(
        {
          type: 'proposal.created',
          actor: agentActor(agent),
          proposalId: proposal.id,
          agentId: agent.id,
          data: {
            operation: proposal.operation,
            paramsHash: proposal.paramsHash,
            summaryHash: proposal.summaryHash,
            expiresAt: proposal.expiresAt.toISOString(),
          },
        },
        now,
      );
      return settle(tx, stored);
    });
    announce(created);
    return { proposal: created, confirmToken };
  }

  /** Loads what a decision needs and refuses anyone who may not decide. Writes nothing. */
  async function authorizeDecider(tx: StoreTransaction, proposalId: string, decider: Decider) {
    const proposal = await tx.lockProposal(proposalId);
    if (!proposal) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    const operation = requireOperation(proposal.operation);
    const agent = await tx.getAgent(proposal.agentId);
    if (!agent) throw new TwokeyError('internal', 'proposal without agent');
    const refusal = deciderRefusal(operation, agent, decider);
    if (refusal) throw refusal;
    const rule = matchApprover(operation.approval.approvers, decider) ?? decider.identity;
    return { proposal, operation, agent, rule };
  }

  async function approve(proposalId: string, decider: Decider): Promise<DecisionResult> {
    const now = clock();
    const decided = await store.transaction(async (tx) => {
      const { proposal, operation, agent, rule } = await authorizeDecider(tx, proposalId, decider);
      const approvals = await tx.listApprovals(proposal.id);
      // A double click or a retried webhook after the quorum was reached is not an error.
      if (approvals.some((a) => a.approver === decider.identity)) {
        return { outcome: 'already_counted' as const, proposal };
      }
      if (proposal.status !== 'pending') {
        throw new TwokeyError('not_pending', `proposal ${proposal.id} is ${proposal.status}`);
      }
      if (now.getTime() >= proposal.expiresAt.getTime()) {
        throw new TwokeyError('expired', `proposal ${proposal.id} expired at ${proposal.expiresAt.toISOString()}`);
      }
      const approval = { proposalId: proposal.id, approver: decider.identity, matchedRule: rule, via: decider.via, at: now };
      if (!(await tx.insertApproval(approval))) return { outcome: 'already_counted' as const, proposal };
      await tx.appendAudit(
        {
          type: 'approval.recorded',
          actor: decider.identity,
          proposalId: proposal.id,
          agentId: agent.id,
          data: { via: decider.via, matchedRule: rule },
        },
        now,
      );
      // The row lock keeps the list read above current: only this transaction can add to it.
      const counted = countedApprovers([...approvals, approval], operation, agent.owners);
      if (counted.length < proposal.quorum) {
        const updated = await tx.updateProposal(proposal.id, { updatedAt: now });
        return { outcome: 'counted' as const, proposal: await settle(tx, updated) };
      }
      const approved = await tx.updateProposal(proposal.id, {
        status: 'approved',
        decidedBy: decider.identity,
        decidedAt: now,
        updatedAt: now,
      });
      await tx.appendAudit(
        {
          type: 'proposal.approved',
          actor: decider.identity,
          proposalId: proposal.id,
          agentId: agent.id,
          data: { approvers: counted, quorum: proposal.quorum },
        },
        now,
      );
      return { outcome: 'quorum_reached' as const, proposal: await settle(tx, approved) };
    });
    if (decided.outcome === 'already_counted') return decided;
    announce(decided.proposal);
    if (decided.outcome === 'quorum_reached' && decided.proposal.commitMode === 'on_approve') {
      const proposal = await executeApproved(decided.proposal.id, decider.identity).catch((error: unknown) => {
        // The approval stands; the failure is recorded on the proposal and can be retried.
        if (error instanceof TwokeyError && error.code === 'execution_failed') return null;
        throw error;
      });
      return { outcome: decided.outcome, proposal: proposal ?? (await mustGet(decided.proposal.id)) };
    }
    return decided;
  }

  async function reject(proposalId: string, decider: Decider, reason?: string | null): Promise<DecisionResult> {
    const now = clock();
    // PostgreSQL text cannot hold NUL; it is invisible anyway, so it goes rather than the rejection failing.
    const cleanReason = reason?.replaceAll('\u0000', '').trim().slice(0, MAX_REASON_LENGTH) || null;
    const proposal = await store.transaction(async (tx) => {
      const { proposal: current, agent } = await authorizeDecider(tx, proposalId, decider);
      if (current.status !== 'pending') {
        throw new TwokeyError('not_pending', `proposal ${current.id} is ${current.status}`);
      }
      const rejected = await tx.updateProposal(current.id, {
        status: 'rejected',
        decidedBy: decider.identity,
        decidedAt: now,
        decisionReason: cleanReason,
        updatedAt: now,
      });
      await tx.appendAudit(
        {
          type: 'proposal.rejected',
          actor: decider.identity,
          proposalId: current.id,
          agentId: agent.id,
          data: { via: decider.via, reason: cleanReason },
        },
        now,
      );
      return settle(tx, rejected);
    });
    return { outcome: 'rejected', proposal: announce(proposal) };
  }

  async function cancel(agent: AgentRecord, proposalId: string): Promise<ProposalRecord> {
    const now = clock();
    const proposal = await store.transaction(async (tx) => {
      const current = await tx.lockProposal(proposalId);
      if (!current || current.agentId !== agent.id) {
        throw new TwokeyError('not_found', `no proposal ${proposalId}`);
      }
      if (current.status !== 'pending') {
        throw new TwokeyError('not_pending', `proposal ${current.id} is ${current.status}`);
      }
      const cancelled = await tx.updateProposal(current.id, {
        status: 'cancelled',
        decidedBy: agentActor(agent),
        decidedAt: now,
        updatedAt: now,
      });
      await tx.appendAudit(
        { type: 'proposal.cancelled', actor: agentActor(agent), proposalId: current.id, agentId: agent.id },
        now,
      );
      return settle(tx, cancelled);
    });
    return announce(proposal);
  }

  /**
   * The commit checks of CONTRACT §4, in order, each with its own code. Runs under the proposal's
   * row lock, so nothing can change between the checks and the consumption.
   */
  function checkCommitClaim(proposal: ProposalRecord | null, agent: AgentRecord, token: string, claim: CommitClaim, now: Date) {
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

  interface ExecutionTrigger {
    actor: string;
    commit?: { agent: AgentRecord; token: string; claim: CommitClaim };
  }

  type Claimed =
    | { done: true; proposal: ProposalRecord }
    | { done: false; request: ExecutionRequest; proposal: ProposalRecord };

  async function claimAndMaybeRun(tx: StoreTransaction, proposalId: string, trigger: ExecutionTrigger): Promise<Claimed> {
    const now = clock();
    const proposal = await tx.lockProposal(proposalId);
    if (trigger.commit) {
      checkCommitClaim(proposal, trigger.commit.agent, trigger.commit.token, trigger.commit.claim, now);
    } else if (!proposal) {
      throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    } else if (proposal.status !== 'approved') {
      throw new TwokeyError('not_pending', `proposal ${proposal.id} is ${proposal.status}, not approved`);
    }
    if (!proposal) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    const operation = requireOperation(proposal.operation);
    const agent = await tx.getAgent(proposal.agentId);
    if (!agent) throw new TwokeyError('internal', 'proposal without agent');
    const approvers = countedApprovers(await tx.listApprovals(proposal.id), operation, agent.owners);
    if (approvers.length < proposal.quorum) {
      throw new TwokeyError('not_approved', `${approvers.length} of ${proposal.quorum} approvals still count`);
    }
    const request: ExecutionRequest = {
      proposalId: proposal.id,
      operation: proposal.operation,
      params: proposal.params,
      agent: agent.name,
      approvedBy: approvers,
      approvedAt: (proposal.decidedAt ?? now).toISOString(),
    };
    const executor = deps.executorFor(proposal.operation);
    if (executor.kind === 'remote') {
      const executing = await tx.updateProposal(proposal.id, {
        status: 'executing',
        leaseUntil: new Date(now.getTime() + leaseMs(proposal.operation)),
        executionAttempts: proposal.executionAttempts + 1,
        updatedAt: now,
      });
      await tx.appendAudit(
        { type: 'execution.started', actor: trigger.actor, proposalId: proposal.id, agentId: agent.id, data: {} },
        now,
      );
      return { done: false, request, proposal: await settle(tx, executing) };
    }
    const result = await executor.run(request).catch((error: unknown) => {
      throw new ExecutionFailure(describeFailure(error));
    });
    return { done: true, proposal: await settle(tx, await recordCommitted(tx, proposal, result, trigger.actor, now)) };
  }

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
    await tx.appendAudit(
      { type: 'proposal.committed', actor, proposalId: proposal.id, agentId: proposal.agentId, data: { result: result ?? null } },
      now,
    );
    return committed;
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
      await tx.appendAudit(
        { type: 'execution.failed', actor, proposalId: proposal.id, agentId: proposal.agentId, data: { error: message } },
        now,
      );
      return settle(tx, failed);
    });
  }

  async function finishRemote(request: ExecutionRequest, actor: string): Promise<ProposalRecord> {
    const executor = deps.executorFor(request.operation);
    let result: unknown;
    try {
      result = await executor.run(request);
    } catch (error) {
      const failed = await recordFailure(request.proposalId, describeFailure(error), actor);
      if (failed) announce(failed);
      throw new TwokeyError('execution_failed', `execution failed: ${describeFailure(error)}`);
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

  async function runExecution(proposalId: string, trigger: ExecutionTrigger): Promise<ProposalRecord> {
    let claimed: Claimed;
    try {
      claimed = await store.transaction((tx) => claimAndMaybeRun(tx, proposalId, trigger));
    } catch (error) {
      if (!(error instanceof ExecutionFailure)) throw error;
      const failed = await recordFailure(proposalId, error.causeMessage, trigger.actor);
      if (failed) announce(failed);
      throw new TwokeyError('execution_failed', `execution failed: ${error.causeMessage}`);
    }
    announce(claimed.proposal);
    if (claimed.done) return claimed.proposal;
    return finishRemote(claimed.request, trigger.actor);
  }

  /** The agent's commit with its confirmation token (`commit: agent` operations, or a retry). */
  function commit(agent: AgentRecord, proposalId: string, token: string, claim: CommitClaim) {
    return runExecution(proposalId, { actor: agentActor(agent), commit: { agent, token, claim } });
  }

  /** Runs an approved proposal: the click that completed the quorum, or an operator's retry. */
  function executeApproved(proposalId: string, actor: string) {
    return runExecution(proposalId, { actor });
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
      const claim = await store.transaction(async (tx) => {
        const current = await tx.lockProposal(stale.id);
        if (!current || current.status !== 'executing' || (current.leaseUntil && current.leaseUntil.getTime() > now.getTime())) return null;
        const agent = await tx.getAgent(current.agentId);
        const operation = deps.operation(current.operation);
        if (!agent || !operation) return null;
        await tx.updateProposal(current.id, {
          leaseUntil: new Date(now.getTime() + leaseMs(current.operation)),
          executionAttempts: current.executionAttempts + 1,
          updatedAt: now,
        });
        await tx.appendAudit(
          { type: 'execution.resumed', actor: 'system', proposalId: current.id, agentId: current.agentId, data: { attempt: current.executionAttempts + 1 } },
          now,
        );
        const request: ExecutionRequest = {
          proposalId: current.id,
          operation: current.operation,
          params: current.params,
          agent: agent.name,
          approvedBy: countedApprovers(await tx.listApprovals(current.id), operation, agent.owners),
          approvedAt: (current.decidedAt ?? now).toISOString(),
        };
        return request;
      });
      if (!claim) continue;
      resumed += 1;
      await finishRemote(claim, 'system').catch((error: unknown) => {
        if (!(error instanceof TwokeyError && error.code === 'execution_failed')) throw error;
      });
    }
    return resumed;
  }

  /** A human's "Retry" after a failed execution: the same rules as an approval click. */
  async function retry(proposalId: string, decider: Decider): Promise<ProposalRecord> {
    await store.transaction((tx) => authorizeDecider(tx, proposalId, decider));
    return executeApproved(proposalId, decider.identity);
  }

  async function mustGet(id: string): Promise<ProposalRecord> {
    const proposal = await store.getProposal(id);
    if (!proposal) throw new TwokeyError('not_found', `no proposal ${id}`);
    return proposal;
  }

  /** Turns pending proposals past their expiry into `expired`. Safe to run on every replica at once. */
  async function expireDue(limit = 100): Promise<number> {
    let expired = 0;
    for (const due of await store.listExpiredPending(clock(), limit)) {
      const now = clock();
      const proposal = await store.transaction(async (tx) => {
        const current = await tx.lockProposal(due.id);
        if (!current || current.status !== 'pending' || current.expiresAt.getTime() > now.getTime()) return null;
        const expired = await tx.updateProposal(current.id, { status: 'expired', decidedBy: 'system', decidedAt: now, updatedAt: now });
        await tx.appendAudit(
          { type: 'proposal.expired', actor: 'system', proposalId: current.id, agentId: current.agentId },
          now,
        );
        return settle(tx, expired);
      });
      if (proposal) {
        expired += 1;
        announce(proposal);
      }
    }
    return expired;
  }

  /** What an agent may see of its own proposal: never the token or its hash. */
  async function viewForAgent(agent: AgentRecord, proposalId: string) {
    const proposal = await store.getProposal(proposalId);
    if (!proposal || proposal.agentId !== agent.id) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    return agentView(proposal, await store.listApprovals(proposal.id));
  }

  return { propose, approve, reject, cancel, commit, executeApproved, retry, expireDue, resumeStaleExecutions, viewForAgent, get: mustGet };
}

export type ProposalService = ReturnType<typeof createProposalService>;

export function agentView(proposal: ProposalRecord, approvals: readonly ApprovalRecord[]) {
  const decided = proposal.decidedAt && proposal.decidedBy;
  return {
    id: proposal.id,
    status: proposal.status,
    operation: proposal.operation,
    params: proposal.params,
    summary: proposal.summary,
    expiresAt: proposal.expiresAt.toISOString(),
    quorum: proposal.quorum,
    approvals: approvals.map((a) => ({ approver: a.approver, at: a.at.toISOString() })),
    decision: decided
      ? { by: proposal.decidedBy, at: proposal.decidedAt?.toISOString(), reason: proposal.decisionReason }
      : null,
    result: proposal.result ?? null,
    error: proposal.error,
  };
}

export type AgentProposalView = ReturnType<typeof agentView>;
