import type { Dispatcher } from 'undici';
import { DeliveryError } from '../lib/delivery-error.js';
import type { Store } from '../core/ports.js';
import { agentView } from '../core/proposals.js';
import type { CallbackStore } from './ports.js';
import { postSigned, webhookKey, type SignedPostAnswer } from '../executors/signed-post.js';
import type { JobHandler } from '../core/jobs.js';
import { ATTRIBUTES, SPANS, inProposalSpan } from '../tracing/index.js';

export interface CallbackDeliveryDeps {
  store: Pick<Store, 'getProposal' | 'getAgent' | 'listApprovals'>;
  callbacks: CallbackStore;
  /**
   * The address guard: agents choose callback URLs, so only allowed addresses are reached. Asked for
   * at each delivery, so it (and undici) can be made with the first callback rather than at start.
   */
  dispatcher: () => Dispatcher;
  clock: () => Date;
  timeoutMs?: number;
}

function retryAfterMs(response: SignedPostAnswer, now: Date): number | undefined {
  const header = response.header('retry-after');
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now.getTime());
}

/**
 * POSTs a proposal's final state to the agent's `callbackUrl`, signed with the agent's callback
 * secret twice: `X-Twokey-Signature: t=…,v1=…` and the Standard Webhooks headers (`webhook-id`,
 * the same on every retry of one event, `webhook-timestamp`, `webhook-signature`). The outbox
 * retries until the receiver answers 2xx; `410 Gone` retires the URL for that agent for good.
 */
export function createCallbackDelivery(deps: CallbackDeliveryDeps) {
  const deliverCallback: JobHandler<'callback.deliver'> = async (payload, context) => {
    const proposal = await deps.store.getProposal(payload.proposalId);
    const callbackUrl = proposal?.callbackUrl;
    if (!proposal || !callbackUrl) return;
    const agent = await deps.store.getAgent(proposal.agentId);
    if (!agent) return;
    if (await deps.callbacks.isDisabled(agent.id, callbackUrl)) return;
    const body = JSON.stringify({
      event: `proposal.${proposal.status}`,
      proposal: agentView(proposal, await deps.store.listApprovals(proposal.id)),
    });
    // One id per proposal and final status: the receiver can drop repeats.
    const deliveryId = `${proposal.id}:${proposal.status}`;
    const post = () =>
      postSigned({
        url: callbackUrl,
        secret: agent.callbackSecret,
        body,
        headers: { 'x-twokey-delivery': deliveryId },
        standardWebhook: { id: deliveryId, key: webhookKey(agent.callbackSecret) },
        timeoutMs: deps.timeoutMs ?? 10_000,
        clock: deps.clock,
        dispatcher: deps.dispatcher(),
        signal: context.signal,
      }).catch((error: unknown) => {
        throw new DeliveryError(`callback to the agent ${error instanceof Error ? error.message : 'failed'}`);
      });
    // In the proposal's trace, so the agent's receiver sees the callback in the trace it proposed in.
    const response = await inProposalSpan(SPANS.callback, proposal, async (span) => {
      span.setAttribute(ATTRIBUTES.outcome, proposal.status);
      const answer = await post();
      span.setAttribute(ATTRIBUTES.httpStatus, answer.status);
      return answer;
    });
    await response.discard();
    if (response.status === 410) {
      await deps.callbacks.disable(agent, callbackUrl, proposal.id, deps.clock());
      return;
    }
    if (response.status >= 300 && response.status < 400) {
      throw new DeliveryError(`callback answered HTTP ${response.status}; redirects are not followed`);
    }
    if (!response.ok) {
      throw new DeliveryError(`callback answered HTTP ${response.status}`, { retryAfterMs: retryAfterMs(response, deps.clock()) });
    }
  };
  return deliverCallback;
}
