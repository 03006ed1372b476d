import type { ChatFollowUp, ChatMessageRef, ChatPublisher, ProposalMessageView } from '../chat/types.js';
import { renderActivity, renderFollowUp } from './adaptive-card.js';
import type { BotConnector } from './connector.js';

export interface TeamsPublisherOptions {
  connector: BotConnector;
  /** The Bot Connector service of the tenant's conversations (TEAMS_SERVICE_URL). */
  serviceUrl: string;
}

/**
 * Posts a proposal's card to its conversation and replaces it in place as the proposal moves on
 * (the activity id is the message's ref). Called by chat sync, after commit. The Bot Connector has
 * no idempotency key: a post whose answer was lost is posted again by the outbox's retry.
 */
export function createTeamsPublisher(options: TeamsPublisherOptions): ChatPublisher {
  const { connector, serviceUrl } = options;
  return {
    platform: 'teams',

    async post(conversation: string, view: ProposalMessageView): Promise<ChatMessageRef> {
      const messageId = await connector.createActivity(serviceUrl, conversation, renderActivity(view));
      return { channel: conversation, messageId };
    },

    async update(ref: ChatMessageRef, view: ProposalMessageView): Promise<void> {
      await connector.updateActivity(serviceUrl, ref.channel, ref.messageId, renderActivity(view));
    },

    async postFollowUp(ref: ChatMessageRef, view: ProposalMessageView, followUp: ChatFollowUp): Promise<void> {
      const activity = renderFollowUp(view, followUp);
      // An escalation's own conversation gets a new post; otherwise a reply under the proposal's card.
      if (followUp.channel && followUp.channel !== ref.channel) {
        await connector.createActivity(serviceUrl, followUp.channel, activity);
        return;
      }
      await connector.replyToActivity(serviceUrl, ref.channel, ref.messageId, activity);
    },
  };
}
