import { TwokeyApiError, outcomeText, type Outcome, type ProposalView, type Twokey } from '../sdk/index.js';

/**
 * The one flow every framework adapter runs: ask twokey once per logical call, wait for the decision,
 * and commit when the operation leaves committing to the agent. The result is the outcome object and
 * the words a model reads, so a denial can never look like a tool that merely failed and invites
 * another try.
 *
 * "Once per logical call" is twokey's request identity (`POST /v1/proposals` with `reuse: true`): the
 * agent, the operation, the canonical params and the conversation. A model told "call this tool again
 * with the same arguments" makes a new tool call with a new id; the identity, not the id, finds the
 * request it is waiting for, and after the agent has read a committed result the same arguments are
 * a new request (docs/api.md, "One request per call").
 */
export interface GatedCall {
  operation: string;
  params: Record<string, unknown>;
  /** The framework's conversation, thread or run: the same call in another conversation is another request. */
  conversation?: string | undefined;
  /**
   * Only for a step the framework re-runs as itself (a LangGraph node resumed after `interrupt()`):
   * the re-run gets the first run's answer back, even once that request is committed and seen.
   */
  idempotencyKey?: string;
  /** How long to wait for a decision before answering `pending` (default 50 s). */
  waitMs?: number;
  signal?: AbortSignal;
}

export interface GatedResult {
  outcome: Outcome;
  /** The executor's result when the operation ran (`outcome.outcome === 'committed'`). */
  result: unknown;
  /** What the model reads: says plainly when the action did not happen and must not be retried. */
  text: string;
  proposalId: string;
  summary: string;
}

const DEFAULT_WAIT_MS = 50_000;

/** Decided for the caller's purposes: nothing more will happen without another call. */
function settled(view: ProposalView, commitByAgent: boolean): boolean {
  const kind = view.outcome.outcome;
  if (kind === 'pending') return false;
  // An approved `on_approve` proposal is still running its executor; wait for the result.
  if (kind === 'approved') return commitByAgent;
  return true;
}

export async function proposeAndAwait(client: Twokey, call: GatedCall): Promise<GatedResult> {
  const asked = await client.proposeOnce(
    { operation: call.operation, params: call.params, ...(call.conversation ? { conversation: call.conversation } : {}) },
    call.idempotencyKey ? { idempotencyKey: call.idempotencyKey } : {},
  );
  const commitByAgent = await commitsByAgent(client, call.operation);
  const waitMs = call.waitMs ?? DEFAULT_WAIT_MS;
  let view = await waitUntilSettled(client, asked.id, call.operation, waitMs, call.signal);
  if (commitByAgent && view.outcome.outcome === 'approved') view = await commitForAgent(client, view, call, asked.confirmToken, waitMs);
  return gatedResultOf(view);
}

/**
 * Commits an approved `commit: agent` proposal with its token. Two calls waiting on one request may
 * both get here: the token is single-use, so the second is refused (`consumed`, or `conflict` while the
 * first runs) and reads what the first one did instead.
 */
async function commitForAgent(client: Twokey, view: ProposalView, call: GatedCall, token: string | null, waitMs: number): Promise<ProposalView> {
  if (!token) {
    throw new Error(`twokey request ${view.id} is approved, but its confirmation token was issued to another API key; only that key can commit it`);
  }
  try {
    await client.commit(view.id, { operation: call.operation, params: call.params }, { confirmToken: token, idempotencyKey: `${view.id}:commit` });
  } catch (error) {
    // A failed execution is recorded on the proposal (outcome `failed`, retryable); the view says so.
    if (!(error instanceof TwokeyApiError) || !['consumed', 'conflict', 'execution_failed'].includes(error.code)) throw error;
  }
  return client.wait(view.id, {
    timeoutMs: waitMs,
    until: (latest) => latest.status !== 'executing' && !(latest.status === 'approved' && latest.error === null),
    ...(call.signal ? { signal: call.signal } : {}),
  });
}

/**
 * Long-polls a proposal until nothing more happens without the caller: decided, and for an
 * `on_approve` operation also executed (an approval alone has not run anything yet).
 */
export async function waitUntilSettled(client: Twokey, proposalId: string, operation: string, waitMs: number, signal?: AbortSignal): Promise<ProposalView> {
  const commitByAgent = await commitsByAgent(client, operation);
  return client.wait(proposalId, { timeoutMs: waitMs, until: (latest) => settled(latest, commitByAgent), ...(signal ? { signal } : {}) });
}

/** The adapter-facing reading of a proposal view (also used when resuming from a stored decision). */
export function gatedResultOf(view: ProposalView): GatedResult {
  const result = view.outcome.outcome === 'committed' ? view.result : null;
  return {
    outcome: view.outcome,
    result,
    text: outcomeText(view.outcome, { result }),
    proposalId: view.id,
    summary: view.summary,
  };
}

const commitModes = new WeakMap<Twokey, Promise<Map<string, string>>>();

async function commitsByAgent(client: Twokey, operation: string): Promise<boolean> {
  let modes = commitModes.get(client);
  if (!modes) {
    modes = client.operations().then((operations) => new Map(operations.map((info) => [info.name, info.commit])));
    // A failed lookup is not cached: the next call asks again.
    modes.catch(() => commitModes.delete(client));
    commitModes.set(client, modes);
  }
  return (await modes).get(operation) === 'agent';
}
