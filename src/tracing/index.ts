/**
 * twokey's OpenTelemetry glue: the names of its spans and attributes, and every way the rest of the
 * code touches a trace. Only `@opentelemetry/api` is used, so without an SDK registered by the
 * operator each call here is a no-op: no span is recorded, no trace header is read, stored or sent.
 */
import {
  context,
  isSpanContextValid,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapSetter,
} from '@opentelemetry/api';
import { noTracer, type TraceCarrier, type TracedProposal, type Tracer } from '../core/tracer.js';

export const SPANS = {
  /** An agent's proposal, from its validation to the answer (policy, grant and an `on_approve` run included). */
  propose: 'twokey.propose',
  /** From the proposal's creation to its decision; recorded when the decision is made. */
  waitForApproval: 'twokey.wait_for_approval',
  /** Running an approved proposal exactly once: the claim, the executor call, the recorded result. */
  commit: 'twokey.commit',
  /** The executor call alone; downstream services receive this span's context. */
  execute: 'twokey.execute',
  /** One delivery attempt of the decision callback to the agent's `callbackUrl`. */
  callback: 'twokey.callback',
} as const;

/** Never params, summaries, tokens or URLs: these identify, they do not describe. */
export const ATTRIBUTES = {
  agent: 'twokey.agent',
  agentId: 'twokey.agent.id',
  operation: 'twokey.operation',
  proposalId: 'twokey.proposal.id',
  /** The proposal's status when the span ended. */
  outcome: 'twokey.outcome',
  /** approved, rejected, expired or cancelled. */
  decision: 'twokey.decision',
  /** Who decided, as a kind only: person, policy, grant, agent, system. */
  decidedBy: 'twokey.decided_by',
  executorKind: 'twokey.executor.kind',
  errorCode: 'twokey.error.code',
  /** OpenTelemetry's own name: a callback receiver's answer. */
  httpStatus: 'http.response.status_code',
} as const;

export type { TraceCarrier, TracedProposal } from '../core/tracer.js';

/** A `tracestate` may carry 32 vendors' entries; more than this is not kept with a proposal. */
const MAX_CARRIER_VALUE_CHARS = 1024;

const tracer = () => trace.getTracer('twokey');

const headersSetter: TextMapSetter<Headers> = { set: (headers, key, value) => headers.set(key, value) };

function activeSpanContext(of: Context = context.active()) {
  const spanContext = trace.getSpanContext(of);
  return spanContext && isSpanContextValid(spanContext) ? spanContext : null;
}

/**
 * Runs an agent request's handler in the trace its `traceparent` names. When an instrumentation (the
 * operator's auto-instrumentations) already made the request's own span current, that span stays
 * the parent: it carries the same trace.
 */
export function withIncomingTrace<T>(headers: Record<string, string | string[] | undefined>, work: () => T): T {
  if (activeSpanContext()) return work();
  return context.with(propagation.extract(context.active(), headers), work);
}

/** Adds the current trace context to an outgoing request's headers (executor calls, callbacks, upstreams). */
export function injectTrace(headers: Record<string, string> | Headers): void {
  if (headers instanceof Headers) propagation.inject(context.active(), headers, headersSetter);
  else propagation.inject(context.active(), headers);
}

/** The current span's context only (no baggage), to keep with a proposal; null when there is none. */
export function captureTrace(): TraceCarrier | null {
  const span = trace.getSpan(context.active());
  if (!span || !isSpanContextValid(span.spanContext())) return null;
  const carrier: TraceCarrier = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  const kept = Object.entries(carrier).filter(([, value]) => value.length <= MAX_CARRIER_VALUE_CHARS);
  return kept.length > 0 ? Object.fromEntries(kept) : null;
}

/**
 * Where a proposal's later spans go: under its propose span, whichever replica and request they run
 * in (a click, an agent's commit, the sweeper). The request's own span, when it is another trace,
 * is kept as a link.
 */
function proposalParent(traceContext: TraceCarrier | null | undefined, current: Context): { parent: Context; links: Link[] } {
  const stored = traceContext ? propagation.extract(ROOT_CONTEXT, traceContext) : null;
  const storedSpan = stored ? activeSpanContext(stored) : null;
  if (!stored || !storedSpan) return { parent: current, links: [] };
  const currentSpan = activeSpanContext(current);
  return { parent: stored, links: currentSpan && currentSpan.traceId !== storedSpan.traceId ? [{ context: currentSpan }] : [] };
}

const codeOf = (error: unknown): string =>
  typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'error';

/** Marks a span failed by its error's closed code; the message, which may quote input, stays out. */
export function failSpan(span: Span, error: unknown): void {
  const code = codeOf(error);
  span.setAttribute(ATTRIBUTES.errorCode, code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

export interface SpanOptions {
  attributes?: Attributes;
  /** Default: the current context. */
  parent?: Context;
  links?: Link[];
}

/** Runs `work` as the current span `name`, failed if it throws, ended either way. */
export function inSpan<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  const parent = options.parent ?? context.active();
  return tracer().startActiveSpan(name, { attributes: options.attributes ?? {}, links: options.links ?? [] }, parent, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Runs `work` as a span in the proposal's trace (see `proposalParent`). */
export function inProposalSpan<T>(
  name: string,
  proposal: Pick<TracedProposal, 'id' | 'agentId' | 'operation' | 'traceContext'>,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  return inSpan(name, { ...proposalParent(proposal.traceContext, context.active()), attributes: proposalAttributes(proposal) }, work);
}

function proposalAttributes(proposal: Pick<TracedProposal, 'id' | 'agentId' | 'operation'>): Attributes {
  return { [ATTRIBUTES.proposalId]: proposal.id, [ATTRIBUTES.agentId]: proposal.agentId, [ATTRIBUTES.operation]: proposal.operation };
}

export function deciderKind(decidedBy: string | null): string {
  if (!decidedBy) return 'none';
  const prefix = /^(policy|grant|agent|system)\b/.exec(decidedBy)?.[1];
  return prefix ?? 'person';
}

/**
 * The wait for approval, recorded once the decision is made (a person may click hours later, on
 * another replica): it starts when the proposal was created and ends when it was decided.
 */
export function recordWaitForApproval(proposal: TracedProposal): void {
  if (!proposal.decidedAt) return;
  const { parent, links } = proposalParent(proposal.traceContext, context.active());
  const span = tracer().startSpan(
    SPANS.waitForApproval,
    {
      startTime: proposal.createdAt,
      links,
      attributes: { ...proposalAttributes(proposal), [ATTRIBUTES.decision]: proposal.status, [ATTRIBUTES.decidedBy]: deciderKind(proposal.decidedBy) },
    },
    parent,
  );
  span.end(proposal.decidedAt);
}

/**
 * A span whose parent is known only part-way through its work: a commit learns which trace it
 * belongs to when it reads the proposal under its row lock. It starts (back-dated to its creation)
 * at `begin`, or at `end` if the proposal was never read.
 */
export function deferredProposalSpan(name: string, proposalId: string) {
  const startTime = Date.now();
  const current = context.active();
  let span: Span | null = null;
  const start = (proposal?: TracedProposal | null): Span => {
    if (span) return span;
    const { parent, links } = proposalParent(proposal?.traceContext, current);
    const attributes = proposal ? proposalAttributes(proposal) : { [ATTRIBUTES.proposalId]: proposalId };
    span = tracer().startSpan(name, { startTime, attributes, links }, parent);
    return span;
  };
  return {
    begin(proposal: TracedProposal | null): void {
      start(proposal);
    },
    /** Runs `work` as the current span `child`, a child of this one. */
    child<T>(child: string, attributes: Attributes, work: () => Promise<T>): Promise<T> {
      return inSpan(child, { parent: trace.setSpan(current, start()), attributes }, () => work());
    },
    end(outcome: { status: string } | { error: unknown }): void {
      const own = start();
      if ('error' in outcome) failSpan(own, outcome.error);
      else own.setAttribute(ATTRIBUTES.outcome, outcome.status);
      own.end();
    },
  };
}

export type DeferredProposalSpan = ReturnType<typeof deferredProposalSpan>;

/**
 * Whether an SDK records spans: one the operator preloaded, `twokey serve` started, or a test
 * registered after start (so asked at each use, not once). Without one the API's spans record
 * nothing, and the core's (names, attributes, contexts, parents read back from the proposal) are
 * not built at all: on the fast path they were a measurable share of a call.
 */
export function spansRecorded(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer('twokey') !== undefined;
}

/** The core's `Tracer` port, recorded with the spans and attributes above; `noTracer` while nothing records. */
export const openTelemetryTracer: Tracer = {
  currentContext: () => (spansRecorded() ? captureTrace() : null),
  propose(agent, operation, work) {
    if (!spansRecorded()) return noTracer.propose(agent, operation, work);
    const attributes = { [ATTRIBUTES.agent]: agent.name, [ATTRIBUTES.agentId]: agent.id, [ATTRIBUTES.operation]: operation };
    return inSpan(SPANS.propose, { attributes }, (span) =>
      work({ proposed: (proposal) => span.setAttributes({ [ATTRIBUTES.proposalId]: proposal.id, [ATTRIBUTES.outcome]: proposal.status }) }),
    );
  },
  waitedForApproval: (proposal) => {
    if (spansRecorded()) recordWaitForApproval(proposal);
  },
  commit(proposalId) {
    if (!spansRecorded()) return noTracer.commit(proposalId);
    const span = deferredProposalSpan(SPANS.commit, proposalId);
    return {
      begin: (proposal) => span.begin(proposal),
      execute: (request, executorKind, work) =>
        span.child(
          SPANS.execute,
          { [ATTRIBUTES.proposalId]: request.proposalId, [ATTRIBUTES.operation]: request.operation, [ATTRIBUTES.executorKind]: executorKind },
          work,
        ),
      end: (outcome) => span.end(outcome),
    };
  },
};
