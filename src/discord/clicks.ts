import type { FastifyBaseLogger } from 'fastify';
import type { DecisionAction } from '../core/decision-preview.js';
import { isTwokeyError, TwokeyError } from '../core/errors.js';
import { seal, unseal } from '../idempotency/seal.js';
import { completedBy, type JobClaim, type JobCompletion, type JobHandler, type JobPayloads } from '../core/jobs.js';
import type { InteractionMeta } from './interaction-payload.js';
import type { DiscordServices } from './ports.js';
import { explainRefusal } from './private-replies.js';

/**
 * A Discord click as it is stored before it is answered (src/outbox/inbox.ts): who (with the roles
 * the signed interaction carried), what, on which proposal, what the form said, and how to answer
 * the person privately later; its schema is the `discord.click` entry of the job catalogue
 * (src/core/jobs.ts). The interaction token is stored sealed (AES-256-GCM under a key derived from
 * the bot token, which the database never holds): a copy of the database, a log line or
 * `twokey jobs list` cannot reveal it.
 */
export type DiscordClick = JobPayloads['discord.click'];

/** A click about to be stored: the decision, without how to reach the person (added from the interaction). */
export type DiscordDecision = DistributiveOmit<DiscordClick, 'interaction' | 'receivedAt'>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

const TOKEN_PURPOSE = 'twokey discord interaction token v1';

/**
 * Discord accepts an interaction token for 15 minutes. A click decided later than this is still
 * decided and its message edited (the outbox's chat sync uses the bot's own API); only a private
 * word about a refusal can no longer be sent.
 */
export const INTERACTION_TOKEN_LIFETIME_MS = 15 * 60_000;
/** Room for the clocks of Discord and twokey to differ, and for the follow-up's own journey. */
const TOKEN_MARGIN_MS = 30_000;

/** The stored form of a click from this interaction, its token sealed under the bot token. */
export function storedClick(decision: DiscordDecision, meta: InteractionMeta, botToken: string, receivedAt: Date): DiscordClick {
  return {
    ...decision,
    interaction: { id: meta.id, applicationId: meta.applicationId, token: seal(meta.token, botToken, meta.id, TOKEN_PURPOSE) },
    receivedAt: receivedAt.toISOString(),
  };
}

/** Refusals that a click's own earlier run may have caused (see src/slack/clicks.ts). */
const CAUSED_BY_AN_EARLIER_RUN = new Set(['not_pending', 'nothing_to_retry']);

export interface DiscordClickJobOptions {
  services: DiscordServices;
  botToken: string;
  logger: () => FastifyBaseLogger;
  /** Sends a private message through the interaction's own webhook. */
  followUp(meta: InteractionMeta, content: string): Promise<void>;
}

/**
 * Decides stored Discord clicks: the outbox runs this for every `discord.click` job, in the process
 * that stored it or, if that one died, in the next. Running a click again is harmless (the core
 * counts one approval per person; a decided proposal refuses another decision). A refusal the core
 * finds now is told privately while the interaction token lives.
 */
export function createDiscordClickJob(options: DiscordClickJobOptions): JobHandler<'discord.click'> {
  const { services } = options;

  /** Decides the click; an approval or a rejection completes the click's job in its own transaction, and answers how that went. */
  async function decide(click: DiscordClick, job: JobClaim | undefined): Promise<JobCompletion | undefined> {
    const { proposalId, decider } = click;
    switch (click.action) {
      case 'approve':
        return (await services.proposals.approve(proposalId, decider, { completing: job })).jobCompletion;
      case 'retry':
        await services.proposals.retry(proposalId, decider);
        return undefined;
      case 'reject':
        return (await services.proposals.reject(proposalId, decider, click.reason, { completing: job })).jobCompletion;
      case 'grant': {
        if (!services.grants) throw new TwokeyError('invalid_request', 'This operation does not allow approving for a while');
        const { grant } = await services.grants.approveAndGrant(proposalId, decider, click.grant);
        options.logger().info({ proposalId, approver: decider.identity, grantId: grant.id }, 'Discord approval with a grant');
        return undefined;
      }
    }
  }

  async function tell(click: DiscordClick, content: string): Promise<void> {
    const age = services.clock().getTime() - new Date(click.receivedAt).getTime();
    const token =
      age < INTERACTION_TOKEN_LIFETIME_MS - TOKEN_MARGIN_MS ? unseal(click.interaction.token, options.botToken, click.interaction.id, TOKEN_PURPOSE) : null;
    if (!token) {
      options.logger().info({ interactionId: click.interaction.id, proposalId: click.proposalId }, 'Discord refusal not told: the interaction has expired');
      return;
    }
    await options.followUp({ id: click.interaction.id, applicationId: click.interaction.applicationId, token, decider: click.decider }, content);
  }

  return async (click, { attempt, claim }) => {
    try {
      return completedBy(await decide(click, claim));
    } catch (error) {
      // Not a refusal (the database went away, a bug): the outbox runs the click again, with backoff.
      if (!isTwokeyError(error)) throw error;
      const verb: DecisionAction = click.action === 'grant' ? 'approve' : click.action;
      options.logger().info({ proposalId: click.proposalId, code: error.code, verb, attempt }, 'Discord click changed nothing');
      if (attempt > 1 && CAUSED_BY_AN_EARLIER_RUN.has(error.code)) return;
      await tell(click, explainRefusal(error, verb));
    }
  };
}
