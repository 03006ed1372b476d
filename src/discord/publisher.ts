import { createHash } from 'node:crypto';
import { Routes, type APIMessage, type REST, type RESTPostAPIChannelMessageJSONBody } from 'discord.js';
import type { ChatFollowUp, ChatMessageRef, ChatPublisher, ProposalMessageView } from '../chat/types.js';
import { renderFollowUp, renderMessage } from './message.js';
import { toDeliveryError, withDeadline } from './rest.js';

export interface DiscordPublisherOptions {
  rest: REST;
  /** Whole call, rate-limit waits included. */
  deadlineMs: number;
}

/** Posts and edits proposal messages with the bot token. Called by chat sync, after commit. */
export function createDiscordPublisher(options: DiscordPublisherOptions): ChatPublisher {
  const { rest, deadlineMs } = options;

  async function call<T>(work: (signal: AbortSignal) => Promise<unknown>): Promise<T> {
    try {
      return (await withDeadline(deadlineMs, work)) as T;
    } catch (error) {
      throw toDeliveryError(error);
    }
  }

  return {
    platform: 'discord',

    async post(channel: string, view: ProposalMessageView): Promise<ChatMessageRef> {
      const body: RESTPostAPIChannelMessageJSONBody = {
        ...renderMessage(view),
        // A post whose answer was lost (timeout, crash) is retried by the outbox; with an enforced nonce
        // Discord returns the first message instead of creating a second one. Proposal ids fit in 25 chars.
        nonce: view.id.slice(0, 25),
        enforce_nonce: true,
      };
      const message = await call<APIMessage>((signal) => rest.post(Routes.channelMessages(channel), { body, signal }));
      return { channel: message.channel_id, messageId: message.id };
    },

    async update(ref: ChatMessageRef, view: ProposalMessageView): Promise<void> {
      await call((signal) => rest.patch(Routes.channelMessage(ref.channel, ref.messageId), { body: renderMessage(view), signal }));
    },

    async postFollowUp(ref: ChatMessageRef, view: ProposalMessageView, followUp: ChatFollowUp): Promise<void> {
      const { content, allowed_mentions } = renderFollowUp(view, followUp);
      // An escalation channel gets a message of its own; otherwise the ping is a reply to the proposal's message.
      const elsewhere = followUp.channel && followUp.channel !== ref.channel ? followUp.channel : null;
      const body: RESTPostAPIChannelMessageJSONBody = {
        content,
        allowed_mentions: elsewhere ? allowed_mentions : { ...allowed_mentions, replied_user: false },
        ...(elsewhere ? {} : { message_reference: { message_id: ref.messageId, channel_id: ref.channel, fail_if_not_exists: false } }),
        // As for the proposal message: a retried post returns the first one. One nonce per reminder and per escalation.
        nonce: followUpNonce(view, followUp.kind),
        enforce_nonce: true,
      };
      await call((signal) => rest.post(Routes.channelMessages(elsewhere ?? ref.channel), { body, signal }));
    },
  };
}

/** Discord's nonces are at most 25 characters: a digest of what makes this follow-up one of a kind. */
function followUpNonce(view: ProposalMessageView, kind: ChatFollowUp['kind']): string {
  return createHash('sha256')
    .update(`${view.id}:${kind}:${view.reminders ?? 0}`)
    .digest('base64url')
    .slice(0, 25);
}
