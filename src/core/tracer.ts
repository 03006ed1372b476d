import type { AgentRecord } from './model.js';

/**
 * Where the core's work shows up in a trace. The core says what happened (a proposal, a decision,
 * a commit, an executor call); the implementation decides span names and attributes. The runtime
 * passes src/tracing's OpenTelemetry one; without it nothing is recorded (`noTracer`).
 */

/** A trace context as a propagator writes it (W3C: `traceparent`, `tracestate`), kept with a proposal. */
export type TraceCarrier = Record<string, string>;

/** What the spans of a proposal's later life read from it: identifiers and times, never params or summaries. */
export interface TracedProposal {
  id: string;
  agentId: string;
  operation: string;
  status: string;
  createdAt: Date;
  decidedAt: Date | null;
  decidedBy: string | null;
  traceContext?: TraceCarrier | null;
}

export interface ProposeSpan {
  /** The proposal the propose span produced, and its status when the agent is answered. */
  proposed(proposal: Pick<TracedProposal, 'id' | 'status'>): void;
}

/**
 * A commit learns which trace it belongs to only when it reads the proposal under its row lock, so
 * its span is named before it starts.
 */
export interface CommitSpan {
  /** The proposal as read under the lock (null when there is none): the span joins its trace. */
  begin(proposal: TracedProposal | null): void;
  /** Runs the executor call as this span's child; a downstream receives the child's trace context. */
  execute<T>(request: { proposalId: string; operation: string }, executorKind: string, work: () => Promise<T>): Promise<T>;
  /** With the proposal's final status, or failed by the error. */
  end(outcome: { status: string } | { error: unknown }): void;
}

export interface Tracer {
  /** The current trace context, kept with a new proposal so its later spans join it; null when there is none. */
  currentContext(): TraceCarrier | null;
  /** Runs `work` as an agent's propose span: failed if it throws, ended either way. */
  propose<T>(agent: Pick<AgentRecord, 'id' | 'name'>, operation: string, work: (span: ProposeSpan) => Promise<T>): Promise<T>;
  /** The wait of a decided proposal, from its creation to its decision. */
  waitedForApproval(proposal: TracedProposal): void;
  /** A commit span of this proposal; nothing is recorded until one of its methods is called. */
  commit(proposalId: string): CommitSpan;
}

const noSpan: ProposeSpan & CommitSpan = {
  proposed: () => undefined,
  begin: () => undefined,
  execute: (_request, _executorKind, work) => work(),
  end: () => undefined,
};

export const noTracer: Tracer = {
  currentContext: () => null,
  propose: (_agent, _operation, work) => work(noSpan),
  waitedForApproval: () => undefined,
  commit: () => noSpan,
};
