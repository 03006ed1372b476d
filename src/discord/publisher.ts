import { Routes, type APIMessage, type REST, type RESTPostAPIChannelMessageJSONBody } from 'discord.js';
import type { ChatMessageRef, ChatPublisher, ProposalMessageView } from '../chat/types.js';
import { renderMessage } from './message.js';
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
  };
}
