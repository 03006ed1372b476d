import { TwokeyError, isTwokeyError, type ErrorCode } from './errors.js';
import type { AgentRecord, ApprovalRecord, Decider, OperationSpec, ProposalRecord, ProposalStatus } from './model.js';
import { isFailedExecution } from './outcome.js';
import { noPeople, samePerson, type People } from './people.js';
import { approverRuleAllows, approverRuleInputOf, type ApproverRule } from '../policy/approver-rule.js';

/**
 * Who may do what to a proposal, decided once. Transports call `previewDecision` to answer a click
 * at once, without a lock (Slack's ephemeral message, Discord's interaction response, the console's
 * missing buttons); the core calls it again under the proposal's row lock, so the preview is advisory
 * and the commit path authoritative. One set of words goes with every refusal code, so a person is
 * told the same thing in every channel.
 */
export type DecisionAction = 'approve' | 'reject' | 'retry';

export type RefusalCode =
  | 'not_found'
  | 'operation_removed'
  | 'owner_cannot_approve'
  | 'not_an_approver'
  | 'approver_rule'
  | 'already_counted'
  | 'not_pending'
  | 'expired'
  | 'nothing_to_retry';

export type DecisionPreview =
  | { allowed: true; action: DecisionAction; /** The approvers-list entry that lets this person decide. */ matchedRule: string }
  | { allowed: false; action: DecisionAction; code: RefusalCode; message: string };

export interface DecisionFacts {
  action: DecisionAction;
  proposalId: string;
  proposal: ProposalRecord | null;
  operation: (Pick<OperationSpec, 'name'> & { approval: { approvers: readonly string[]; approverRule?: ApproverRule | undefined } }) | undefined;
  agent: Pick<AgentRecord, 'name' | 'owners'> | null;
  /** Needed for `approve` (already counted); ignored otherwise. */
  approvals: readonly ApprovalRecord[];
  decider: Decider;
  now: Date;
  people?: People;
  /**
   * How the transport shows a name inside the words (default `"argus"`; the console, which sets
   * names apart with markup, shows them bare). The words themselves are the same everywhere.
   */
  showName?: (name: string) => string;
}

/** The approvers-list entry that lets this person decide, or null. */
export function matchApprover(approvers: readonly string[], decider: Decider): string | null {
  if (approvers.includes(decider.identity)) return decider.identity;
  return decider.memberOf?.find((group) => approvers.includes(group)) ?? null;
}

/** The owner identity that makes this decider an owner (the decider's own, or another of their person's). */
export function ownerIdentityOf(owners: readonly string[], identity: string, people: People = noPeople): string | null {
  if (owners.includes(identity)) return identity;
  return owners.find((owner) => samePerson(people, owner, identity)) ?? null;
}

/**
 * Approvals that still count, one identity per person: the approvers-list entry is still configured
 * and the approver's person does not own the agent. Re-checked at commit, so a config change between
 * approval and commit cannot smuggle in a removed approver, and one person with two accounts is one key.
 */
export function countedApprovers(
  approvals: readonly ApprovalRecord[],
  operation: { approval: { approvers: readonly string[] } },
  owners: readonly string[],
  people: People = noPeople,
): string[] {
  const seen = new Set<string>();
  const counted: string[] = [];
  for (const approval of approvals) {
    if (!operation.approval.approvers.includes(approval.matchedRule)) continue;
    if (ownerIdentityOf(owners, approval.approver, people)) continue;
    const person = people.personOf(approval.approver);
    if (seen.has(person)) continue;
    seen.add(person);
    counted.push(approval.approver);
  }
  return counted;
}

const decidedWords: Partial<Record<ProposalStatus, string>> = {
  expired: 'This proposal has expired; the agent has to propose it again.',
  cancelled: 'The agent cancelled this proposal, so it can no longer be decided.',
  executing: 'This proposal has already been decided and is being executed right now.',
};

const retryWords: Record<ProposalStatus, string> = {
  pending: 'it is still waiting for approval',
  approved: 'it is approved and its execution has not failed',
  executing: 'it is being executed right now',
  committed: 'it has already run',
  rejected: 'it was rejected',
  expired: 'it expired',
  cancelled: 'the agent cancelled it',
};

const quoted = (name: string): string => `"${name}"`;

/** The one set of words for each refusal. The transports add only their own form ("Nothing changed"). */
function refusalWords(code: RefusalCode, facts: DecisionFacts, detail: string | null): string {
  const { proposal, operation, agent, decider } = facts;
  switch (code) {
    case 'not_found':
      return `twokey has no proposal ${facts.proposalId}.`;
    case 'operation_removed':
      return `The operation ${proposal?.operation ?? ''} is no longer in twokey's configuration, so this proposal can no longer be decided.`;
    case 'owner_cannot_approve': {
      const through = detail && detail !== decider.identity ? ` (through ${detail}, who is the same person)` : '';
      const name = (facts.showName ?? quoted)(agent?.name ?? proposal?.agentId ?? '');
      return `You own the agent ${name} that proposed this${through}, so you cannot decide on it: two keys means two different people.`;
    }
    case 'not_an_approver':
      return `You (${decider.identity}) are not an approver of ${operation?.name ?? ''}: you are not on the approvers list by name, group or role.`;
    case 'approver_rule':
      return `You (${decider.identity}) may not approve this proposal: ${sentence(detail ?? 'the approver rule does not allow you')}`;
    case 'already_counted': {
      const as = detail && detail !== decider.identity ? `, given as ${detail}` : '';
      const counted = operation && agent ? countedApprovers(facts.approvals, operation, agent.owners, facts.people).length : facts.approvals.length;
      return `Your approval is already counted (${counted} of ${proposal?.quorum ?? 1})${as}.`;
    }
    case 'not_pending':
      return notPendingWords(proposal?.status ?? null);
    case 'expired':
      return decidedWords.expired ?? '';
    case 'nothing_to_retry':
      return `There is nothing to retry: ${proposal ? retryWords[proposal.status] : 'the proposal is gone'}.`;
  }
}

const sentence = (text: string): string => (/[.!?]$/.test(text) ? text : `${text}.`);

/**
 * The operation's approver rule, for an approval or a retry (both make the operation run; a
 * rejection stops it, so anyone on the list may still reject). The reason when it refuses, or null.
 */
function approverRuleRefusal(facts: DecisionFacts, people: People): string | null {
  const rule = facts.operation?.approval.approverRule;
  if (!rule || facts.action === 'reject' || !facts.proposal) return null;
  const { decider } = facts;
  const verdict = approverRuleAllows(
    rule,
    approverRuleInputOf(
      {
        approver: { identity: decider.identity, groups: [...(decider.groups ?? []), ...(decider.memberOf ?? [])] },
        agent: { name: facts.agent?.name ?? facts.proposal.agentId, owners: facts.agent?.owners ?? [] },
        operation: facts.proposal.operation,
        params: facts.proposal.params,
      },
      (identity) => people.nameOf(identity),
    ),
  );
  return verdict.allowed ? null : verdict.reason;
}

function notPendingWords(status: ProposalStatus | null): string {
  if (status === null) return 'This proposal has already been decided.';
  return decidedWords[status] ?? `This proposal has already been decided: it is ${status}.`;
}

/**
 * May this person do this to this proposal now, and if not, why. Pure: the facts are read by the
 * caller (without a lock for a preview, under the row lock in the core). The checks run in this
 * order, so everyone gets the same answer: the proposal and its operation exist; the person's
 * person owns no identity among the agent's owners; the person is an approver (directly or through a
 * group or role); then per action — approve: not already counted (as any identity of the same person;
 * a late double click is not an error), still pending, not expired (at `expiresAt` exactly it is);
 * reject: pending, not expired; retry: the execution failed.
 */
export function previewDecision(facts: DecisionFacts): DecisionPreview {
  const { action, proposal, operation, decider, now } = facts;
  const people = facts.people ?? noPeople;
  const refuse = (code: RefusalCode, detail: string | null = null): DecisionPreview => ({
    allowed: false,
    action,
    code,
    message: refusalWords(code, facts, detail),
  });
  if (!proposal) return refuse('not_found');
  if (!operation) return refuse('operation_removed');
  const owner = ownerIdentityOf(facts.agent?.owners ?? [], decider.identity, people);
  if (owner) return refuse('owner_cannot_approve', owner);
  const matchedRule = matchApprover(operation.approval.approvers, decider);
  if (!matchedRule) return refuse('not_an_approver');
  const ruleRefusal = approverRuleRefusal(facts, people);
  if (ruleRefusal !== null) return refuse('approver_rule', ruleRefusal);
  if (action === 'retry') {
    return isFailedExecution(proposal) ? { allowed: true, action, matchedRule } : refuse('nothing_to_retry');
  }
  if (action === 'approve') {
    const mine = facts.approvals.find((approval) => samePerson(people, approval.approver, decider.identity));
    if (mine) return refuse('already_counted', mine.approver);
  }
  if (proposal.status !== 'pending') return refuse('not_pending');
  if (now.getTime() >= proposal.expiresAt.getTime()) return refuse('expired');
  return { allowed: true, action, matchedRule };
}

const errorCodes: Record<Exclude<RefusalCode, 'already_counted'>, ErrorCode> = {
  not_found: 'not_found',
  operation_removed: 'operation_removed',
  owner_cannot_approve: 'owner_cannot_approve',
  not_an_approver: 'not_an_approver',
  approver_rule: 'not_an_approver',
  not_pending: 'not_pending',
  expired: 'expired',
  nothing_to_retry: 'nothing_to_retry',
};

/** A refused decision thrown by the core: its message is the refusal's words, said to the decider. */
export class DecisionRefused extends TwokeyError {
  constructor(
    readonly refusal: Exclude<RefusalCode, 'already_counted'>,
    message: string,
  ) {
    super(errorCodes[refusal], message);
  }
}

/** The refusal as the core throws it (`already_counted` is an outcome, never an error). */
export function refusalError(preview: Extract<DecisionPreview, { allowed: false }>): DecisionRefused | null {
  return preview.code === 'already_counted' ? null : new DecisionRefused(preview.code, preview.message);
}

/** How every channel ends a refusal told after a click. */
export const NOTHING_CHANGED = 'Nothing was changed.';

/**
 * What to tell the person when a decision failed on the commit path (a race the preview could not
 * see, or an execution that failed). The core's own refusals carry their words; a bare error gets the
 * words of its code.
 */
export function explainDecisionError(error: unknown, action: DecisionAction): string {
  if (!isTwokeyError(error)) {
    // It may have failed after its commit: the message shows the state, so no claim that nothing changed.
    return `twokey could not complete your ${action} because of an internal error. The message shows the proposal's current state; try again if it did not change.`;
  }
  if (error.code === 'execution_failed') return failedExecutionWords(action, error.message.replace(/^execution failed: /, ''));
  return `${refusalReason(error)} ${NOTHING_CHANGED}`;
}

function refusalReason(error: TwokeyError): string {
  if (error instanceof DecisionRefused) return error.message;
  switch (error.code) {
    case 'not_pending':
      return notPendingWords(null);
    case 'expired':
      return decidedWords.expired ?? '';
    case 'not_an_approver':
      return 'You are not an approver of this operation: you are not on the approvers list by name, group or role.';
    case 'owner_cannot_approve':
      return 'You own the agent that proposed this, so you cannot decide on it: two keys means two different people.';
    case 'operation_removed':
      return "This operation is no longer in twokey's configuration, so this proposal can no longer be decided.";
    case 'not_found':
      return 'twokey has no such proposal.';
    default:
      return error.message.endsWith('.') ? error.message : `${error.message}.`;
  }
}

/** What the person whose click ran the operation is told when it failed. */
export function failedExecutionWords(action: DecisionAction, reason: string): string {
  const what = action === 'retry' ? 'The operation failed again' : 'Approved, but the operation failed';
  return `${what}: ${reason}. The approval stands and nothing took effect; press Retry to run it again.`;
}
