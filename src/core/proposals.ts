import type { ProposalSnapshot } from './changes.js';
import { createDecisions } from './decisions.js';
import { RefusalError, TwokeyError } from './errors.js';
import { createExecutionPipeline, type ExecutionAtPropose } from './execution.js';
import type { ExecutorResolver } from './executor.js';
import { newId } from './ids.js';
import { outcomeOf } from './outcome.js';
import { countsRecentProposals, decideAtPropose } from './automatic-decisions.js';
import { finalStatuses, type AgentRecord, type ApprovalRecord, type AuditEventInput, type Clock, type OperationSpec, type ProposalRecord } from './model.js';
import { noPeople, type People } from './people.js';
import type { ChatPlatformName } from './jobs.js';
import type { Store, StoreTransaction } from './ports.js';
import { mintConfirmToken, paramsHash, sha256Hex } from './secrets.js';
import { noTracer, type Tracer } from './tracer.js';
import { agentActor, createTransitions, type TransitionDeps } from './transitions.js';

export type { CommitClaim } from './execution.js';
export type { ApproveOutcome, DecisionResult } from './decisions.js';

export interface ProposalServiceDeps {
  store: Store;
  operation(name: string): OperationSpec | undefined;
  executorFor: ExecutorResolver;
  clock: Clock;
  /** Who is the same human behind several identities; without it, every identity is its own person. */
  people?: People;
  /**
   * How long an execution claim on a remote executor lasts before recovery may take it over; longer
   * than the executor's own timeout, so a live call is never taken over.
   */
  executionLeaseMs?(operation: string): number;
  /** Called after every committed state change (long-poll wake-ups, metrics); see `TransitionDeps.onChange`. Must not throw. */
  onChange?: TransitionDeps['onChange'];
  /** Called once per decision (approved, rejected, expired, cancelled), after its commit. Must not throw. */
  onDecided?(proposal: ProposalRecord): void;
  /** The chat platforms wired in, by name (see `TransitionDeps.chatPlatforms`). */
  chatPlatforms?: ReadonlySet<ChatPlatformName>;
  /** Why twokey will not call this `callbackUrl` (credentials, a refused address), or null. */
  callbackUrlProblem?(url: string): string | null;
  /** Proposals one agent may have waiting for a decision at once (TWOKEY_MAX_PENDING_PER_AGENT); unlimited when absent. */
  maxPendingPerAgent?: number;
  /** Records proposals, decisions, commits and executor calls in a trace; nothing is recorded without it. */
  tracer?: Tracer;
  /** Where a person approves a `stepUp: passkey` proposal with their passkey (the console's page of it). */
  stepUpLink?: (proposalId: string) => string;
}

export interface ProposeInput {
  operation: string;
  params: unknown;
  callbackUrl?: string | null;
}

/** A new pending proposal and its confirmation token (returned once; only its hash is kept). */
function newProposal(
  agent: AgentRecord,
  operation: OperationSpec,
  input: { params: Record<string, unknown>; callbackUrl: string | null },
  now: Date,
  traceContext: ProposalRecord['traceContext'],
) {
  const { params, callbackUrl } = input;
  const context = { agent: agent.name, operation: operation.name, params };
  // The server writes the summary: the human approves what twokey says, never what the agent says.
  const summary = operation.renderSummary(context);
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
    callbackUrl,
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
    approvers: null,
    reminders: 0,
    escalatedAt: null,
    traceContext,
  };
  return { proposal, confirmToken };
}

/** The checks a proposal passes before anything is stored: the operation, the agent's right to it, its params, its callback. */
function checkProposal(deps: ProposalServiceDeps, agent: AgentRecord, input: ProposeInput): OperationSpec {
  const operation = deps.operation(input.operation);
  if (!operation) throw new TwokeyError('unknown_operation', `unknown operation "${input.operation}"`);
  if (agent.operations && !agent.operations.includes(operation.name)) {
    throw new TwokeyError('operation_not_allowed', `agent "${agent.name}" may not propose "${operation.name}"`);
  }
  const problems = operation.validateParams(input.params);
  if (problems.length > 0) {
    throw new TwokeyError('invalid_params', `params do not match the schema of "${operation.name}"`, problems);
  }
  const callbackProblem = input.callbackUrl ? deps.callbackUrlProblem?.(input.callbackUrl) : null;
  if (callbackProblem) {
    throw new TwokeyError('invalid_request', `callbackUrl ${callbackProblem}`, [{ path: '/callbackUrl', message: callbackProblem }]);
  }
  return operation;
}

/**
 * Decides a new proposal before it is stored: policy rules, then, for one no rule decided, the
 * pending-per-agent limit and grants (their audit rows follow the creation's). Returns the row to
 * insert and its audit rows. A proposal a rule decides waits for nobody, so the limit of proposals
 * waiting for a decision does not refuse it, and its transaction takes no agent lock (but when its
 * rules count the agent's recent proposals, which they do under that lock).
 */
async function decideNewProposal(
  tx: StoreTransaction,
  proposal: ProposalRecord,
  agent: AgentRecord,
  operation: OperationSpec,
  /** The agent's limit of proposals waiting for a decision; none when undefined. */
  max: number | undefined,
): Promise<{ proposal: ProposalRecord; audit: Array<{ event: AuditEventInput; at: Date }> }> {
  // Counted under the agent's row lock, so concurrent proposals of one agent cannot overshoot it.
  const countWaiting = () => (max === undefined ? Promise.resolve(0) : tx.lockAgentAndCountWaiting(agent.id, proposal.createdAt, max));
  // Rules that count the agent's recent proposals count them under that lock too, as before any rule ran.
  const countedFirst = countsRecentProposals(operation) ? await countWaiting() : null;
  const automatic = await decideAtPropose(tx, { proposal, agent, operation, now: proposal.createdAt }, async () => {
    if (max !== undefined && (countedFirst ?? (await countWaiting())) >= max) {
      throw new RefusalError(
        'rate_limited',
        'pending_proposals',
        `this agent has ${max} proposals waiting for a decision (the limit); wait for decisions or cancel some`,
      );
    }
  });
  const created: AuditEventInput = {
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
  };
  return { proposal: automatic.proposal, audit: [created, ...automatic.audit].map((event) => ({ event, at: proposal.createdAt })) };
}

/** Decided at propose time and meant to run at once: its execution begins in the same transaction. */
const runsOnDecision = (proposal: ProposalRecord): proposal is ProposalRecord & { decidedBy: string } =>
  proposal.status === 'approved' && proposal.commitMode === 'on_approve' && proposal.decidedBy !== null;

export function createProposalService(deps: ProposalServiceDeps) {
  const { store, clock } = deps;
  const people = deps.people ?? noPeople;
  const tracer = deps.tracer ?? noTracer;
  const transitions = createTransitions({ ...deps, tracer });
  const { settle, announce, announceDecision } = transitions;
  const pipeline = createExecutionPipeline({ ...deps, transitions, people, tracer });
  const decisions = createDecisions({ store, clock, people, operation: deps.operation, transitions, execution: pipeline, stepUpLink: deps.stepUpLink });

  function propose(agent: AgentRecord, input: ProposeInput) {
    return tracer.propose(agent, input.operation, async (span) => {
      const proposed = await proposeInSpan(agent, input);
      span.proposed(proposed.proposal);
      return proposed;
    });
  }

  async function proposeInSpan(agent: AgentRecord, input: ProposeInput) {
    const operation = checkProposal(deps, agent, input);
    const { proposal, confirmToken } = newProposal(
      agent,
      operation,
      { params: input.params as Record<string, unknown>, callbackUrl: input.callbackUrl ?? null },
      clock(),
      // The propose span's context: what the decision, execution and callbacks join later.
      tracer.currentContext(),
    );
    // One transaction: the decision and, when a rule or a grant approved it to run at once, the
    // execution's start (a local executor's result, or a remote one's claim), all in the row's insert.
    let execution: ExecutionAtPropose | null = null;
    const made = await store
      .transaction(async (tx) => {
        const decided = await decideNewProposal(tx, proposal, agent, operation, deps.maxPendingPerAgent);
        let row = decided.proposal;
        const audit = decided.audit;
        if (runsOnDecision(row)) {
          // Decided without a click: it runs as a human approval would.
          execution = await pipeline.executeAtPropose(tx, row, agent, row.decidedBy);
          row = execution.proposal;
          audit.push(...execution.audit);
        }
        const stored = await tx.insertProposal(row);
        for (const { event, at } of audit) await tx.appendAudit(event, at);
        return { decided: decided.proposal, stored: await settle(tx, stored, { type: 'proposed', agent }) };
      })
      .catch((error: unknown) => {
        (execution as ExecutionAtPropose | null)?.abandon(error);
        throw error;
      });
    // A policy rule or a grant may have decided it already.
    if (made.decided.status === 'pending') return { proposal: announce(made.stored), confirmToken };
    const started = execution as ExecutionAtPropose | null;
    if (!started) return { proposal: announceDecision(made.stored), confirmToken };
    // The decision is announced as it was made (approved), then what its execution made of it; a
    // remote claim is announced when its call starts.
    announceDecision(made.decided);
    if (made.stored.status !== 'executing') announce(made.stored);
    const executed = await started.finish(made.stored).catch((error: unknown) => {
      if (error instanceof TwokeyError && error.code === 'execution_failed') return null;
      throw error;
    });
    return { proposal: executed ?? (await mustGet(proposal.id)), confirmToken };
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
      const cancelled = tx.updateProposal(current, { status: 'cancelled', decidedBy: agentActor(agent), decidedAt: now, updatedAt: now });
      await tx.appendAudit({ type: 'proposal.cancelled', actor: agentActor(agent), proposalId: current.id, agentId: agent.id }, now);
      return settle(tx, cancelled);
    });
    return announceDecision(proposal);
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
        const expired = tx.updateProposal(current, { status: 'expired', decidedBy: 'system', decidedAt: now, updatedAt: now });
        await tx.appendAudit({ type: 'proposal.expired', actor: 'system', proposalId: current.id, agentId: current.agentId }, now);
        return settle(tx, expired);
      });
      if (proposal) {
        expired += 1;
        announceDecision(proposal);
      }
    }
    return expired;
  }

  /**
   * What an agent may see of its own proposal: never the token or its hash. Answering it with a final
   * outcome is what "seen" means for its request identity (src/core/request-identity.ts): after that a
   * committed or expired request no longer answers an identical call. `published`, the snapshot of a
   * change committed here (a long-poll woken by it), is the proposal as that change left it: the
   * view is made from it without reading the proposal again.
   */
  async function viewForAgent(agent: AgentRecord, proposalId: string, published?: ProposalSnapshot) {
    const found = published?.proposal.id === proposalId ? published : await store.getProposalWithApprovals(proposalId);
    if (!found || found.proposal.agentId !== agent.id) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
    if (found.unseenRequest && finalStatuses.includes(found.proposal.status)) await store.markRequestSeen(proposalId, clock());
    return agentView(found.proposal, found.approvals);
  }

  return {
    propose,
    ...decisions,
    cancel,
    commit: pipeline.commit,
    commitWithApprovals: pipeline.commitWithApprovals,
    executeApproved: pipeline.executeApproved,
    expireDue,
    resumeStaleExecutions: pipeline.resumeStaleExecutions,
    viewForAgent,
    get: mustGet,
  };
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
    decision: decided ? { by: proposal.decidedBy, at: proposal.decidedAt?.toISOString(), reason: proposal.decisionReason } : null,
    result: proposal.result ?? null,
    error: proposal.error,
    outcome: outcomeOf(proposal, approvals),
  };
}

export type AgentProposalView = ReturnType<typeof agentView>;
