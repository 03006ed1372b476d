import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { outcomeText } from '@twokey/client';
import type { OperationDefinition } from '../config/config-file.js';
import { snapshotOf, type ProposalSnapshot } from '../core/changes.js';
import { TwokeyError } from '../core/errors.js';
import type { AgentRecord } from '../core/model.js';
import { agentView, type AgentProposalView } from '../core/proposals.js';
import type { TokenSealer } from '../core/request-identity.js';
import type { McpStore } from './ports.js';
import type { McpServices } from './ports.js';

export interface McpCallDeps extends Pick<McpServices, 'proposals' | 'requests' | 'changes' | 'operation' | 'clock'> {
  store: Pick<McpStore, 'clientSupportsUrlElicitation'>;
  /** How long one tools/call waits for the decision before answering `pending`. */
  waitMs: number;
  /** Re-read interval: the change feed wakes us at once for this process's changes (and NOTIFY's), this covers the rest. */
  longPollIntervalMs: number;
  /** Where people reach the console, for the approval page offered through URL elicitation. */
  consoleBase(): string;
}

export interface CallContext {
  /** Aborted by `notifications/cancelled` or a client that went away: stops the wait, never the proposal. */
  signal: AbortSignal;
  /** Present when the client sent a progress token. */
  progress?(update: { progress: number; total: number; message: string }): Promise<void>;
  /** Present when the client can open a URL for the user (URL-mode elicitation). */
  offerUrl?(request: { url: string; message: string; elicitationId: string }): void;
  /** Seals the confirmation token under the caller's API key, for a repeat of the same request through /v1. */
  sealer?: TokenSealer;
}

/** Clients that reset their timeout on progress stay alive during a long wait. */
const HEARTBEAT_MS = 10_000;
const SECRET_SHAPED = /tk_(?:conf|agent|link)_|whsec_/;

/** Tool names the agent asked for that it may not see are unknown to it, as in tools/list. */
export class UnknownToolError extends Error {
  override readonly name = 'UnknownToolError';
}

function containsSecret(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next === 'string' && SECRET_SHAPED.test(next)) return true;
    if (typeof next === 'object' && next !== null) {
      for (const [key, item] of Object.entries(next)) {
        if (SECRET_SHAPED.test(key)) return true;
        pending.push(item);
      }
    }
  }
  return false;
}

/** In the SDK's key order (content, structuredContent, isError): both ways in answer the same JSON. */
export function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

const FINAL_OUTCOMES = new Set(['committed', 'denied', 'expired', 'cancelled', 'failed']);

export function createMcpCalls(deps: McpCallDeps) {
  const { proposals, store, clock } = deps;
  const agentActor = (agent: AgentRecord) => `agent:${agent.name}`;
  let waiting = 0;

  /**
   * The proposal that answers this call: the request identity every way in shares (agent, operation,
   * canonical arguments; src/core/request-identity.ts). Rule-decided operations (read-only upstream
   * tools) are not deduplicated: reading twice must read twice. `view` when the proposal as propose
   * left it answers the call: a new proposal has no approvals yet (a rule or a grant decides without
   * one), and propose returns it as its execution left it, so reading it back would only repeat it.
   */
  async function proposalFor(
    agent: AgentRecord,
    operation: OperationDefinition,
    params: Record<string, unknown>,
    context: CallContext,
  ): Promise<{ id: string; created: boolean; view?: AgentProposalView }> {
    if (operation.autoApprove) {
      const { proposal } = await proposals.propose(agent, { operation: operation.name, params });
      return { id: proposal.id, created: true, view: agentView(proposal, []) };
    }
    // The token is kept sealed only for a repeat through /v1 with the same key: over MCP twokey itself commits (see executeForAgent).
    const found = await deps.requests.proposeOnce(agent, { operation: operation.name, params }, context.sealer ? { sealer: context.sealer } : {});
    return { id: found.created ? found.proposal.id : found.proposalId, created: found.created };
  }

  /**
   * `commit: agent` over MCP: the client cannot hold a confirmation token, so twokey commits for the
   * agent while the agent is asking (a waiting or repeated call), through the same execution path as a
   * commit: approved status, approvals that still count, one execution. After the expiry nothing runs.
   */
  async function executeForAgent(agent: AgentRecord, view: AgentProposalView): Promise<AgentProposalView> {
    if (clock().getTime() >= new Date(view.expiresAt).getTime()) return view;
    try {
      await proposals.executeApproved(view.id, agentActor(agent));
    } catch (error) {
      // Another call or replica ran it first, or the execution failed and is recorded on the proposal.
      if (!(error instanceof TwokeyError) || !['execution_failed', 'not_pending', 'conflict', 'not_approved'].includes(error.code)) throw error;
    }
    return proposals.viewForAgent(agent, view.id);
  }

  function settled(view: AgentProposalView, operation: OperationDefinition): boolean {
    if (FINAL_OUTCOMES.has(view.outcome.outcome)) return true;
    // Approved under commit: agent but past its expiry: nothing more will happen to it.
    return view.status === 'approved' && operation.commit === 'agent' && clock().getTime() >= new Date(view.expiresAt).getTime();
  }

  function progressMessage(view: AgentProposalView, operation: OperationDefinition): string {
    if (view.status === 'executing' || view.status === 'approved') return `approved by ${view.outcome.decidedBy.join(', ')}; running`;
    return `waiting for approval: ${view.approvals.length} of ${view.quorum} (${operation.approval.approvers.join(', ')})`;
  }

  async function awaitDecision(agent: AgentRecord, operation: OperationDefinition, id: string, context: CallContext): Promise<AgentProposalView> {
    const started = Date.now();
    const deadline = started + deps.waitMs;
    const stop = new AbortController();
    const onAbort = () => stop.abort(context.signal.reason);
    context.signal.addEventListener('abort', onAbort);
    let reported = '';
    let lastReport = 0;
    waiting += 1;
    // The snapshot of the change that woke this wait, when it was committed here with one: the view
    // is then made from it, without reading the proposal again.
    let published: ProposalSnapshot | undefined;
    try {
      for (;;) {
        // Subscribe before reading, so a change between the two is not missed.
        const changed = deps.changes.next(id, Math.min(deps.longPollIntervalMs, Math.max(0, deadline - Date.now())), stop.signal);
        let view = await proposals.viewForAgent(agent, id, published);
        if (operation.commit === 'agent' && view.status === 'approved' && view.error === null) view = await executeForAgent(agent, view);
        if (settled(view, operation) || context.signal.aborted || Date.now() >= deadline) return view;
        const message = progressMessage(view, operation);
        if (context.progress && (message !== reported || Date.now() - lastReport >= HEARTBEAT_MS)) {
          reported = message;
          lastReport = Date.now();
          // Progress must grow with each notification: the seconds waited do.
          await context.progress({ progress: (Date.now() - started) / 1000, total: deps.waitMs / 1000, message }).catch(() => undefined);
        }
        published = snapshotOf(await changed);
      }
    } finally {
      waiting -= 1;
      // With a reason: the default one is a DOMException built (with its stack) for nobody to read.
      stop.abort('answered');
      context.signal.removeEventListener('abort', onAbort);
    }
  }

  function answer(view: AgentProposalView, operation: OperationDefinition): CallToolResult {
    const { outcome } = view;
    const lapsed = view.status === 'approved' && operation.commit === 'agent' && outcome.outcome === 'approved' && settled(view, operation);
    const text = lapsed
      ? `Approved by ${outcome.decidedBy.join(', ')}, but the approval expired before it was used. The action did not happen; ask again only if it is still needed.`
      : outcomeText(outcome, { result: view.result, awaiting: operation.approval.approvers });
    return {
      content: [{ type: 'text', text: `${text} (request ${view.id})` }],
      structuredContent: { ...outcome, result: view.result ?? null },
      isError: outcome.outcome === 'denied' || outcome.outcome === 'expired' || outcome.outcome === 'cancelled' || outcome.outcome === 'failed',
    };
  }

  /** tools/call: validate like POST /v1/proposals, propose or find the open proposal, wait, answer with the outcome. */
  async function call(agent: AgentRecord, name: string, args: unknown, context: CallContext): Promise<CallToolResult> {
    const operation = deps.operation(name);
    if (!operation || (agent.operations && !agent.operations.includes(operation.name))) throw new UnknownToolError(`unknown tool "${name}"`);
    const params = args ?? {};
    const problems = operation.validateParams(params);
    if (problems.length > 0) {
      return toolError(
        `The arguments do not match the schema of ${operation.name}; nothing was requested:\n${problems.map((p) => `- ${p.path || '(root)'}: ${p.message}`).join('\n')}`,
      );
    }
    if (containsSecret(params)) {
      return toolError(
        'The arguments contain a twokey secret (a tk_… token or whsec_… secret); nothing was requested. Never pass tokens or secrets as arguments.',
      );
    }
    const proposed = await proposalFor(agent, operation, params as Record<string, unknown>, context);
    const { id, created } = proposed;
    let view = proposed.view ?? (await proposals.viewForAgent(agent, id));
    // The model was told a failed execution may be retried: calling again is that retry.
    if (!created && view.outcome.outcome === 'failed') view = await executeForAgent(agent, view);
    if (created && view.status === 'pending' && context.offerUrl && operation.approval.approvers.some((a) => a.startsWith('web:'))) {
      if (await store.clientSupportsUrlElicitation(agent.id)) {
        context.offerUrl({
          url: new URL(`/console/proposals/${id}`, deps.consoleBase()).toString(),
          message: `${view.summary} An approver can decide in the twokey console.`,
          elicitationId: id,
        });
      }
    }
    if (!settled(view, operation)) view = await awaitDecision(agent, operation, id, context);
    return answer(view, operation);
  }

  /** Calls waiting for a decision right now in this process (a cancelled call stops waiting). */
  const waitingCalls = () => waiting;

  return { call, waitingCalls };
}

export type McpCalls = ReturnType<typeof createMcpCalls>;
