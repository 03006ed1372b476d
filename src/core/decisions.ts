import type { SnapshotFacts } from './changes.js';
import { countedApprovers, previewDecision, refusalError, type DecisionAction } from './decision-preview.js';
import { TwokeyError } from './errors.js';
import type { ApprovedClaim, ExecutionPipeline } from './execution.js';
import { operationFor, type Clock, type Decider, type OperationSpec, type ProposalRecord } from './model.js';
import type { People } from './people.js';
import type { Store, StoreTransaction } from './ports.js';
import type { JobClaim, JobCompletion } from './jobs.js';
import { checkStepUp } from './step-up.js';
import type { Transitions } from './transitions.js';

/**
 * Humans deciding: approve, reject, retry, and the preview of each. Every decision runs
 * `previewDecision` under the proposal's row lock; the transports' previews are advisory.
 */
export interface DecisionDeps {
  store: Store;
  clock: Clock;
  people: People;
  operation(name: string): OperationSpec | undefined;
  transitions: Transitions;
  execution: Pick<ExecutionPipeline, 'executeApproved' | 'planClaimWhenApproved' | 'runApprovedClaim'>;
  /** Where a person approves a `stepUp: passkey` proposal with their passkey: the console's page of it. */
  stepUpLink?: (proposalId: string) => string;
}

export type ApproveOutcome = 'counted' | 'already_counted' | 'quorum_reached';

export interface DecisionResult {
  outcome: ApproveOutcome | 'rejected';
  proposal: ProposalRecord;
  /** With `completing`: how the job's completion, written by the decision's own transaction, went. */
  jobCompletion?: JobCompletion;
}

/**
 * How a decision is asked for. `completing`: the stored click (an outbox job) this decision settles;
 * it is completed in the decision's transaction, so it is done exactly when the decision is
 * durable (an execution the decision starts has its own lease and recovery). A refused decision
 * commits nothing and completes nothing: the job then ends as its handler does.
 */
export interface DecisionOptions {
  completing?: JobClaim | undefined;
}

const MAX_REASON_LENGTH = 500;

export function createDecisions(deps: DecisionDeps) {
  const { store, clock, people, transitions, execution } = deps;
  const { settle, announce, announceDecision } = transitions;

  async function getProposal(id: string): Promise<ProposalRecord> {
    const proposal = await store.getProposal(id);
    if (!proposal) throw new TwokeyError('not_found', `no proposal ${id}`);
    return proposal;
  }

  /**
   * The decision rules again, under the row lock: the preview a transport showed was advisory, this
   * is the answer. Throws the refusal; `alreadyCounted` is the one refusal that is not an error.
   */
  /** The operation as it applies to this proposal: escalation may have added approvers. */
  function configuredFor(proposal: ProposalRecord) {
    const configured = deps.operation(proposal.operation);
    return configured ? operationFor(proposal, configured) : undefined;
  }

  async function authorize(tx: StoreTransaction, proposalId: string, decider: Decider, action: DecisionAction, now: Date) {
    const locked = await tx.lockProposalWithContext(proposalId);
    const proposal = locked?.proposal ?? null;
    const operation = proposal ? configuredFor(proposal) : undefined;
    if (locked && operation && !locked.agent) throw new TwokeyError('internal', 'proposal without agent');
    const agent = operation ? (locked?.agent ?? null) : null;
    const approvals = locked && action === 'approve' ? locked.approvals : [];
    const preview = previewDecision({ action, proposalId, proposal, operation, agent, approvals, decider, now, people });
    if (!preview.allowed) {
      const refusal = refusalError(preview);
      if (refusal) throw refusal;
    }
    // The preview allowed, or refused only as already counted: everything below exists.
    if (!proposal || !operation || !agent) throw new TwokeyError('internal', 'decision facts missing');
    const matchedRule = preview.allowed ? preview.matchedRule : decider.identity;
    // What an agent's view is made of besides the row, as read under the lock: the decision's change
    // is announced with it (the approvals as the decision leaves them), so a woken wait reads nothing.
    const known = { approvals: locked?.approvals ?? [], unseenRequest: locked?.unseenRequest ?? false };
    return { proposal, operation, agent, approvals, known, matchedRule, alreadyCounted: !preview.allowed };
  }

  /**
   * An approval as recorded; when it completed the quorum of an `on_approve` proposal with a remote
   * executor, its execution's claim; `known`, what the announce of the proposal given carries with it.
   */
  type RecordedApproval = DecisionResult & { claim?: ApprovedClaim | null; known?: SnapshotFacts };

  async function recordApproval(tx: StoreTransaction, proposalId: string, decider: Decider, now: Date): Promise<RecordedApproval> {
    const { proposal, operation, agent, approvals, known, matchedRule, alreadyCounted } = await authorize(tx, proposalId, decider, 'approve', now);
    // A double click or a retried webhook after the quorum was reached is not an error.
    if (alreadyCounted) return { outcome: 'already_counted', proposal };
    checkStepUp(operation, proposal, decider, deps.stepUpLink);
    const stepUp = decider.stepUp ?? null;
    const approval = { proposalId: proposal.id, approver: decider.identity, matchedRule, via: decider.via, at: now, stepUp };
    // Not counted yet (`authorize` read the approvals under the row lock, which holds until commit).
    tx.addApproval(approval);
    // The assertion goes into the chained audit row too, so `twokey audit verify` can re-check it.
    const data = { via: decider.via, matchedRule, ...(stepUp ? { stepUp } : {}) };
    await tx.appendAudit({ type: 'approval.recorded', actor: decider.identity, proposalId: proposal.id, agentId: agent.id, data }, now);
    // The row lock keeps the list read above current: only this transaction can add to it.
    const counted = countedApprovers([...approvals, approval], operation, agent.owners, people);
    const afterApproval = { approvals: [...known.approvals, approval], unseenRequest: known.unseenRequest };
    if (counted.length < proposal.quorum) {
      const updated = tx.updateProposal(proposal, { updatedAt: now });
      return { outcome: 'counted', proposal: await settle(tx, updated), known: afterApproval };
    }
    const decision = { status: 'approved', decidedBy: decider.identity, decidedAt: now, updatedAt: now } as const;
    // The row as this decision leaves it: the locked row read above, with the decision's fields.
    const approved: ProposalRecord = { ...proposal, ...decision };
    // The click that completes the quorum of an `on_approve` proposal also claims its execution, in the same write of the row.
    const plan = approved.commitMode === 'on_approve' ? execution.planClaimWhenApproved(approved, agent, afterApproval, decider.identity, now) : null;
    const written = tx.updateProposal(proposal, plan ? { ...decision, ...plan.step.patch } : decision);
    await tx.appendAudit(
      { type: 'proposal.approved', actor: decider.identity, proposalId: proposal.id, agentId: agent.id, data: { approvers: counted, quorum: proposal.quorum } },
      now,
    );
    if (plan) await tx.appendAudit(plan.step.audit, now);
    const settled = await settle(tx, written);
    // With a claim, the proposal announced first is the decision (approved), which the stored row
    // (executing) has already moved past: a wait is told of it and reads the row; the claim's own
    // announce carries the snapshot.
    return plan
      ? { outcome: 'quorum_reached', proposal: approved, claim: plan.claimOf(settled) }
      : { outcome: 'quorum_reached', proposal: settled, claim: null, known: afterApproval };
  }

  async function approve(proposalId: string, decider: Decider, options: DecisionOptions = {}): Promise<DecisionResult> {
    const decided = await store.transaction(async (tx) => {
      const now = clock();
      const recorded = await recordApproval(tx, proposalId, decider, now);
      return { ...recorded, jobCompleted: completing(tx, options, now) };
    });
    const { outcome, proposal: decidedProposal, claim, known } = decided;
    const completed = await completionOf(decided);
    if (outcome === 'already_counted') return { outcome, proposal: decidedProposal, ...completed };
    if (outcome === 'quorum_reached') announceDecision(decidedProposal, known);
    else announce(decidedProposal, known);
    if (outcome !== 'quorum_reached' || decidedProposal.commitMode !== 'on_approve') return { outcome, proposal: decidedProposal, ...completed };
    const executing = claim ? execution.runApprovedClaim(claim, decider.identity) : execution.executeApproved(decidedProposal.id, decider.identity);
    const proposal = await executing.catch((error: unknown) => {
      // The approval stands; the failure is recorded on the proposal and can be retried.
      if (error instanceof TwokeyError && error.code === 'execution_failed') return null;
      throw error;
    });
    return { outcome, proposal: proposal ?? (await getProposal(decidedProposal.id)), ...completed };
  }

  /**
   * The job this decision completes, in its transaction (`DecisionOptions`). Its answer comes once the
   * transaction committed, so the work hands it out in an object (a promise the work returned would
   * be awaited before the transaction could end) and `completionOf` reads it after.
   */
  function completing(tx: StoreTransaction, options: DecisionOptions, now: Date): Promise<JobCompletion> | undefined {
    return options.completing ? tx.completeJob(options.completing, now) : undefined;
  }

  async function completionOf({ jobCompleted }: { jobCompleted: Promise<JobCompletion> | undefined }): Promise<Pick<DecisionResult, 'jobCompletion'>> {
    return jobCompleted ? { jobCompletion: await jobCompleted } : {};
  }

  async function reject(proposalId: string, decider: Decider, reason?: string | null, options: DecisionOptions = {}): Promise<DecisionResult> {
    const now = clock();
    // PostgreSQL text cannot hold NUL; it is invisible anyway, so it goes rather than the rejection failing.
    const cleanReason = reason?.replaceAll('\u0000', '').trim().slice(0, MAX_REASON_LENGTH) || null;
    const decided = await store.transaction(async (tx) => {
      const { proposal: current, agent, known } = await authorize(tx, proposalId, decider, 'reject', now);
      const rejected = tx.updateProposal(current, {
        status: 'rejected',
        decidedBy: decider.identity,
        decidedAt: now,
        decisionReason: cleanReason,
        updatedAt: now,
      });
      await tx.appendAudit(
        { type: 'proposal.rejected', actor: decider.identity, proposalId: current.id, agentId: agent.id, data: { via: decider.via, reason: cleanReason } },
        now,
      );
      return { proposal: await settle(tx, rejected), known, jobCompleted: completing(tx, options, now) };
    });
    return { outcome: 'rejected', proposal: announceDecision(decided.proposal, decided.known), ...(await completionOf(decided)) };
  }

  /** A human's "Retry" after a failed execution: the same people as an approval, and only a failed execution. */
  async function retry(proposalId: string, decider: Decider): Promise<ProposalRecord> {
    await store.transaction((tx) => authorize(tx, proposalId, decider, 'retry', clock()));
    return execution.executeApproved(proposalId, decider.identity);
  }

  /**
   * The preview of a decision, read without a lock: what a transport tells a person before (or
   * instead of) deciding. The core decides again under the row lock.
   */
  async function preview(proposalId: string, action: DecisionAction, decider: Decider) {
    const proposal = await store.getProposal(proposalId);
    const operation = proposal ? configuredFor(proposal) : undefined;
    const agent = proposal ? await store.getAgent(proposal.agentId) : null;
    const approvals = proposal && action === 'approve' ? await store.listApprovals(proposal.id) : [];
    return previewDecision({ action, proposalId, proposal, operation, agent, approvals, decider, now: clock(), people });
  }

  return { approve, reject, retry, preview };
}

export type Decisions = ReturnType<typeof createDecisions>;
