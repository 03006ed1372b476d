import { outcomeText, type Outcome } from '../core/outcome.js';
import type { ProposalView, Twokey } from '../sdk/index.js';

/**
 * The one flow every framework adapter runs: propose through twokey under an idempotency key the
 * framework makes stable across retries (a tool call id, a graph thread + node), wait for the
 * decision, and commit when the operation leaves committing to the agent. The result is the
 * outcome object and the words a model reads, so a denial can never look like a tool that merely
 * failed and invites another try.
 */
export interface GatedCall {
  operation: string;
  params: Record<string, unknown>;
  /** Stable across retries of the same step: the same key never asks a human twice. */
  idempotencyKey: string;
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
  const created = await client.propose({ operation: call.operation, params: call.params }, { idempotencyKey: call.idempotencyKey });
  const commitByAgent = await commitsByAgent(client, call.operation);
  let view = await waitUntilSettled(client, created.id, call.operation, call.waitMs ?? DEFAULT_WAIT_MS, call.signal);
  if (commitByAgent && view.outcome.outcome === 'approved') {
    await client.commit(
      created.id,
      { operation: call.operation, params: call.params },
      { confirmToken: created.confirmToken, idempotencyKey: `${call.idempotencyKey}:commit` },
    );
    view = await client.get(created.id);
  }
  return gatedResultOf(view);
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
