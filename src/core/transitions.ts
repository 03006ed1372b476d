import type { ProposalSnapshot, SnapshotFacts } from './changes.js';
import { TwokeyError } from './errors.js';
import type { AgentRecord, Clock, OperationSpec, ProposalRecord } from './model.js';
import { jobsForChange, type ProposalChange } from './effects.js';
import type { ChatPlatformName } from './jobs.js';
import type { StoreTransaction } from './ports.js';
import { noTracer, type Tracer } from './tracer.js';

/** What every state change of a proposal needs, shared by decisions and the execution pipeline. */
export interface TransitionDeps {
  clock: Clock;
  operation(name: string): OperationSpec | undefined;
  /**
   * Called after every committed state change (long-poll wake-ups, metrics), with the change's
   * snapshot when its author knew the approvals too. Must not throw.
   */
  onChange?(proposal: ProposalRecord, snapshot?: ProposalSnapshot): void;
  /**
   * The chat platforms wired in, by name: a change edits the proposal's message on each of them that
   * the operation posts to (see effects.ts). Read at every change; none when absent.
   */
  chatPlatforms?: ReadonlySet<ChatPlatformName>;
  /**
   * Called once per proposal, after the commit of its decision (approved, rejected, expired,
   * cancelled), by whoever made it: a person, a rule, a grant, the agent, the sweeper. Must not throw.
   */
  onDecided?(proposal: ProposalRecord): void;
  /** Records each decision's wait for approval; nothing is recorded without it. */
  tracer?: Tracer;
}

export const agentActor = (agent: Pick<AgentRecord, 'name'>): string => `agent:${agent.name}`;

export function createTransitions(deps: TransitionDeps) {
  const tracer = deps.tracer ?? noTracer;

  function requireOperation(name: string): OperationSpec {
    const operation = deps.operation(name);
    if (!operation) {
      throw new TwokeyError('operation_removed', `operation "${name}" is no longer in the configuration`);
    }
    return operation;
  }

  /**
   * Ends a state change inside its transaction: given the proposal as it now stands and what just
   * happened to it, queues what must reach the outside (follow-ups, chat edits, callbacks, pings;
   * decided by `jobsForChange` in effects.ts) in the outbox and wakes long-polls on every replica —
   * all of it committed, or rolled back, with the change itself.
   */
  async function settle(tx: StoreTransaction, proposal: ProposalRecord, change: ProposalChange = { type: 'changed' }): Promise<ProposalRecord> {
    const at = deps.clock();
    const jobs = jobsForChange(proposal, change, { operation: deps.operation(proposal.operation), chatPlatforms: deps.chatPlatforms ?? [], at });
    if (jobs.length > 0) await tx.enqueue(jobs, at);
    await tx.notifyChange(proposal.id);
    return proposal;
  }

  /**
   * After commit only: tells this process's listeners. `known`, when the caller holds the proposal's
   * approvals as they stand after this change (read under its row lock), lets a waiting agent be
   * answered from the proposal given, without a read.
   */
  function announce(proposal: ProposalRecord, known?: SnapshotFacts): ProposalRecord {
    deps.onChange?.(proposal, known && { proposal, ...known });
    return proposal;
  }

  /** After the commit of a decision only: `announce` (with what it knew), and the decision's metrics and span, once. */
  function announceDecision(proposal: ProposalRecord, known?: SnapshotFacts): ProposalRecord {
    announce(proposal, known);
    tracer.waitedForApproval(proposal);
    deps.onDecided?.(proposal);
    return proposal;
  }

  /** The agent that proposed this proposal, read in the transaction. */
  async function proposingAgentOf(tx: StoreTransaction, proposal: ProposalRecord): Promise<AgentRecord> {
    const agent = await tx.getAgent(proposal.agentId);
    if (!agent) throw new TwokeyError('internal', 'proposal without agent');
    return agent;
  }

  const operationExists = (name: string): boolean => deps.operation(name) !== undefined;

  return { requireOperation, operationExists, settle, announce, announceDecision, proposingAgentOf };
}

export type Transitions = ReturnType<typeof createTransitions>;
