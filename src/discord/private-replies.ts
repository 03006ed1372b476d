import { InteractionResponseType, MessageFlags, Routes, type APIInteractionResponse, type REST } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { explainDecisionError, type DecisionAction } from '../core/decision-preview.js';
import { isTwokeyError } from '../core/errors.js';
import type { InteractionMeta } from './interaction-payload.js';
import { describeRestFailure, withDeadline } from './rest.js';

/** How a click is answered: at once (within Discord's 3 seconds), and privately after the work. */

/** What an interaction needs answered, wherever it came from (HTTP or the gateway). */
export interface InteractionReply {
  response: APIInteractionResponse;
  /**
   * The decision itself. It runs after the response is sent: Discord drops an interaction that is not
   * answered within 3 seconds, and an approval can run the operation, which may take longer.
   */
  after?: () => Promise<void>;
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

export interface PrivateRepliesOptions {
  rest: REST;
  logger: () => FastifyBaseLogger;
  /** Deadline of a follow-up message. */
  followUpDeadlineMs: number;
}

export function createPrivateReplies(options: PrivateRepliesOptions) {
  const { rest, followUpDeadlineMs } = options;

  /** A private message after the response was already sent (the outcome of work done after it). */
  async function followUp(meta: InteractionMeta, content: string): Promise<void> {
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
  }

  /** Runs a decision after the response; a refusal found only then (a race) becomes a follow-up. */
  function decideLater(meta: InteractionMeta, proposalId: string, action: DecisionAction, decide: () => Promise<unknown>): () => Promise<void> {
    return async () => {
      try {
        await decide();
      } catch (error) {
        if (!isTwokeyError(error)) {
          options.logger().error({ err: error, proposalId, interactionId: meta.id }, 'Discord decision failed');
        }
        await followUp(meta, explainRefusal(error, action));
      }
    };
  }

  /**
   * Answers now (deferred) and decides after the checks, which did not finish within the budget;
   * a refusal they find follows privately.
   */
  function checkThenDecide(
    meta: InteractionMeta,
    proposalId: string,
    action: DecisionAction,
    checking: () => Promise<{ refusal: string | null }>,
    decide: () => Promise<unknown>,
  ): InteractionReply {
    return {
      response: DEFERRED_UPDATE,
      after: async () => {
        let refusal: string | null;
        try {
          ({ refusal } = await checking());
        } catch (error) {
          options.logger().error({ err: error, proposalId, interactionId: meta.id }, 'Discord click checks failed');
          return followUp(meta, explainRefusal(error, action));
        }
        if (refusal) return followUp(meta, refusal);
        return decideLater(meta, proposalId, action, decide)();
      },
    };
  }

  return { followUp, decideLater, checkThenDecide };
}
