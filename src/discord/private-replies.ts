import { InteractionResponseType, MessageFlags, Routes, type APIInteractionResponse, type REST } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { explainDecisionError, type DecisionAction } from '../core/decision-preview.js';
import type { InteractionMeta } from './interaction-payload.js';
import { describeRestFailure, withDeadline } from './rest.js';

/** How a click is answered: at once (within Discord's 3 seconds), and privately after the work. */

/** What an interaction needs answered, wherever it came from (HTTP or the gateway). */
export interface InteractionReply {
  response: APIInteractionResponse;
  /**
   * The job id of the click stored before this answer: the outbox decides it, woken once the answer
   * is on its way (an approval can run the operation, which may take longer than Discord's 3 seconds).
   */
  stored?: number;
}

export const ephemeral = (content: string): InteractionReply => ({
  response: {
    type: InteractionResponseType.ChannelMessageWithSource,
    data: { content, flags: MessageFlags.Ephemeral, allowed_mentions: { parse: [] } },
  },
});

// Acknowledges a click without changing the message now; the message is edited by chat sync.
export const DEFERRED_UPDATE: APIInteractionResponse = { type: InteractionResponseType.DeferredMessageUpdate };

/** The private explanation for a refused decision: the core's words for its code. */
export function explainRefusal(error: unknown, action: DecisionAction = 'approve'): string {
  return explainDecisionError(error, action);
}

export interface FollowUpOptions {
  rest: REST;
  logger: () => FastifyBaseLogger;
  /** Deadline of a follow-up message. */
  followUpDeadlineMs: number;
}

/** A private message after the response was already sent (the outcome of work done after it). */
export function createFollowUp(options: FollowUpOptions) {
  const { rest, followUpDeadlineMs } = options;
  return async function followUp(meta: InteractionMeta, content: string): Promise<void> {
    try {
      await withDeadline(followUpDeadlineMs, (signal) =>
        rest.post(Routes.webhook(meta.applicationId, meta.token), {
          body: { content, flags: MessageFlags.Ephemeral, allowed_mentions: { parse: [] } },
          auth: false,
          signal,
        }),
      );
    } catch (error) {
      options.logger().warn({ interactionId: meta.id, ...describeRestFailure(error) }, 'Discord follow-up message failed');
    }
  };
}
