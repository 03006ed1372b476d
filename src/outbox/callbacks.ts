import { DeliveryError } from '../chat/types.js';
import type { Store } from '../core/ports.js';
import { agentView } from '../core/proposals.js';
import { postSigned } from '../executors/signed-post.js';

export interface CallbackDeliveryDeps {
  store: Pick<Store, 'getProposal' | 'getAgent' | 'listApprovals'>;
  clock: () => Date;
  timeoutMs?: number;
}

function retryAfterMs(response: Response): number | undefined {
  const header = response.headers.get('retry-after');
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * POSTs a proposal's final state to the agent's `callbackUrl`, signed with the agent's callback
 * secret (`X-Twokey-Signature: t=…,v1=…`). The outbox retries until the receiver answers 2xx.
 */
export function createCallbackDelivery(deps: CallbackDeliveryDeps) {
  return async function deliverCallback(payload: Record<string, unknown>): Promise<void> {
    const proposal = await deps.store.getProposal(String(payload.proposalId));
    if (!proposal?.callbackUrl) return;
    const agent = await deps.store.getAgent(proposal.agentId);
    if (!agent) return;
    const body = JSON.stringify({
      event: `proposal.${proposal.status}`,
      proposal: agentView(proposal, await deps.store.listApprovals(proposal.id)),
    });
    const response = await postSigned({
      url: proposal.callbackUrl,
      secret: agent.callbackSecret,
      body,
      // The receiver can drop repeats: one delivery id per proposal and final status.
      headers: { 'x-twokey-delivery': `${proposal.id}:${proposal.status}` },
      timeoutMs: deps.timeoutMs ?? 10_000,
      clock: deps.clock,
    }).catch((error: unknown) => {
      throw new DeliveryError(`callback to the agent ${error instanceof Error ? error.message : 'failed'}`);
    });
    await response.body?.cancel();
    if (!response.ok) {
      throw new DeliveryError(`callback answered HTTP ${response.status}`, { retryAfterMs: retryAfterMs(response) });
    }
  };
}
