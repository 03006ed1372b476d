import { webApi } from '@slack/bolt';
import type { ChatMessageRef, ChatPublisher, ProposalMessageView } from '../chat/types.js';
import { DeliveryError } from '../lib/delivery-error.js';
import { renderFollowUp, renderProposalMessage, renderTrail } from './blocks.js';

type WebClient = InstanceType<typeof webApi.WebClient>;

/**
 * Slack answers that no retry can fix: a wrong channel, a bot not in it, a dead token, a message that
 * can no longer be edited, or blocks Slack refuses. The outbox parks these instead of retrying.
 */
const PERMANENT_ERRORS = new Set([
  'channel_not_found',
  'not_in_channel',
  'is_archived',
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'no_permission',
  'missing_scope',
  'ekm_access_denied',
  'team_access_not_granted',
  'restricted_action',
  'message_not_found',
  'cant_update_message',
  'edit_window_closed',
  'invalid_blocks',
  'invalid_blocks_format',
  'msg_too_long',
  'too_many_attachments',
  'invalid_arguments',
]);

/** When Slack did not say how long to wait after a `ratelimited` answer. */
const DEFAULT_RATE_LIMIT_WAIT_MS = 30_000;

/**
 * Turns whatever the Web API client threw into a DeliveryError the outbox can act on. The message
 * names the Slack error code only: never the request (it holds the token) or the response body.
 */
export function toDeliveryError(method: string, error: unknown): DeliveryError {
  if (error instanceof DeliveryError) return error;
  if (error instanceof webApi.WebAPIRateLimitedError) {
    return new DeliveryError(`Slack ${method}: rate limited`, { retryAfterMs: error.retryAfter * 1000 });
  }
  if (error instanceof webApi.WebAPIPlatformError) {
    const code = error.data.error;
    if (code === 'ratelimited') {
      const retryAfter = error.data.response_metadata?.retryAfter;
      return new DeliveryError(`Slack ${method}: ratelimited`, {
        retryAfterMs: typeof retryAfter === 'number' ? retryAfter * 1000 : DEFAULT_RATE_LIMIT_WAIT_MS,
      });
    }
    return new DeliveryError(`Slack ${method}: ${code}`, { permanent: PERMANENT_ERRORS.has(code) });
  }
  if (error instanceof webApi.WebAPIHTTPError) {
    return new DeliveryError(`Slack ${method}: HTTP ${error.statusCode}`);
  }
  if (error instanceof webApi.WebAPIRequestError) {
    return new DeliveryError(`Slack ${method}: request failed (${error.original.name})`);
  }
  // e.g. a 429 without a usable Retry-After, which the client reports as a plain Error.
  const message = error instanceof Error && /rate limit/i.test(error.message) ? 'rate limited' : 'failed';
  return new DeliveryError(`Slack ${method}: ${message}`);
}

async function call<T>(method: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw toDeliveryError(method, error);
  }
}

/**
 * Posts and edits proposal messages. Every failure is thrown as a DeliveryError and nothing is
 * retried here: the caller (the outbox) owns retries, so a Slack outage cannot pile up hidden work.
 */
export function createSlackPublisher(client: WebClient): ChatPublisher {
  return {
    platform: 'slack',
    async post(channel: string, view: ProposalMessageView): Promise<ChatMessageRef> {
      const message = renderProposalMessage(view);
      const response = await call('chat.postMessage', () => client.chat.postMessage({ channel, ...message, unfurl_links: false, unfurl_media: false }));
      if (!response.ts) throw new DeliveryError('Slack chat.postMessage: no message ts in the answer');
      // Slack answers with the channel id even when the config names the channel.
      return { channel: response.channel ?? channel, messageId: response.ts };
    },
    async update(ref: ChatMessageRef, view: ProposalMessageView): Promise<void> {
      const message = renderProposalMessage(view);
      await call('chat.update', () => client.chat.update({ channel: ref.channel, ts: ref.messageId, ...message }));
    },
    async postFollowUp(ref, view, followUp): Promise<void> {
      const text = renderFollowUp(view, followUp);
      // An escalation channel gets a message of its own; otherwise the ping is a reply in the thread.
      const where = followUp.channel && followUp.channel !== ref.channel ? { channel: followUp.channel } : { channel: ref.channel, thread_ts: ref.messageId };
      await call('chat.postMessage', () => client.chat.postMessage({ ...where, text, unfurl_links: false, unfurl_media: false }));
    },
    async postTrail(ref: ChatMessageRef, view: ProposalMessageView): Promise<void> {
      await call('chat.postMessage', () =>
        client.chat.postMessage({ channel: ref.channel, thread_ts: ref.messageId, text: renderTrail(view), unfurl_links: false, unfurl_media: false }),
      );
    },
  };
}
