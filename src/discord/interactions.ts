import { InteractionResponseType, type REST } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { NOTHING_CHANGED } from '../core/decision-preview.js';
import { isTwokeyError, TwokeyError } from '../core/errors.js';
import type { GrantRequest } from '../core/grant-service.js';
import type { Decider } from '../core/model.js';
import { INBOX_UNAVAILABLE_WORDS } from '../outbox/inbox.js';
import { DISCORD_CLICK_JOB } from './platform.js';
import type { Settled } from '../lib/timeouts.js';
import { createBurstScheduler, DEFAULT_BURST_GAP_MS, RecentIds, settleInBudget, startedOnce } from './burst-scheduler.js';
import { createClickChecks } from './click-checks.js';
import { createDiscordClickJob, storedClick, type DiscordDecision } from './clicks.js';
import { parseInteraction, type InteractionMeta, type ModalFields, type ParsedInteraction } from './interaction-payload.js';
import { parseCustomId } from './message.js';
import type { DiscordServices } from './ports.js';
import { grantModal, readGrantForm, REASON_INPUT, rejectModal } from './modals.js';
import { createFollowUp, DEFERRED_UPDATE, ephemeral, explainRefusal, type InteractionReply } from './private-replies.js';

export { parseInteraction } from './interaction-payload.js';
export { explainRefusal, type InteractionReply } from './private-replies.js';

export interface InteractionHandlerOptions {
  services: DiscordServices;
  rest: REST;
  logger: () => FastifyBaseLogger;
  /** Seals the interaction tokens of stored clicks; the bot token, which the database never holds. */
  botToken: string;
  /** Interaction ids remembered for de-duplication (per process). */
  recentIdsCapacity?: number;
  /** Deadline of a follow-up message. */
  followUpDeadlineMs?: number;
  /**
   * How long the checks before a response may take. Discord drops an interaction not answered within
   * 3 s (transit included); past this budget the click is stored and acknowledged anyway, and the
   * core's checks come when it is decided.
   */
  ackBudgetMs?: number;
  /**
   * Clicks closer together than this (or arriving while another is being answered) form a burst:
   * every click of it is stored and answered at once, unchecked. Default 250 ms.
   */
  burstGapMs?: number;
}

/** One interaction handler shared by the HTTP endpoint and the gateway. */
export function createInteractionHandler(options: InteractionHandlerOptions) {
  const { services } = options;
  const recent = new RecentIds(options.recentIdsCapacity ?? 10_000);
  const { checkClick, grantDurations } = createClickChecks(services);
  const followUp = createFollowUp({ rest: options.rest, logger: options.logger, followUpDeadlineMs: options.followUpDeadlineMs ?? 10_000 });
  const ackBudgetMs = options.ackBudgetMs ?? 50;
  const scheduler = createBurstScheduler({ burstGapMs: options.burstGapMs ?? DEFAULT_BURST_GAP_MS });

  /**
   * Stores the decision, then acknowledges it (a deferred update: the message is edited once it is
   * decided). A click that cannot be stored is answered privately that twokey cannot reach its
   * database, and changes nothing.
   */
  async function stored(meta: InteractionMeta, decision: DiscordDecision): Promise<InteractionReply> {
    try {
      const click = storedClick(decision, meta, options.botToken, services.clock());
      const id = await services.inbox.store({ kind: DISCORD_CLICK_JOB, payload: click, proposalId: decision.proposalId });
      return { response: DEFERRED_UPDATE, stored: id };
    } catch (error) {
      options
        .logger()
        .warn(
          { interactionId: meta.id, proposalId: decision.proposalId, error: error instanceof Error ? error.message : 'unknown' },
          'Discord click not stored',
        );
      return ephemeral(INBOX_UNAVAILABLE_WORDS);
    }
  }

  /** "Approve for…" whose checks ran late: the form opens unchecked (its submission is checked in full). */
  async function grantModalUnchecked(proposalId: string): Promise<InteractionReply> {
    try {
      const proposal = await services.store.getProposal(proposalId);
      if (!proposal) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
      return { response: grantModal(proposalId, proposal.operation, grantDurations(proposal.operation)) };
    } catch (error) {
      if (isTwokeyError(error)) return ephemeral(explainRefusal(error, 'approve'));
      // Reading the proposal failed: the database is away.
      options.logger().warn({ err: error, proposalId }, 'Discord grant form failed');
      return ephemeral(INBOX_UNAVAILABLE_WORDS);
    }
  }

  /**
   * The checks within the budget. Checks that failed (the database is away) count as not done in
   * time: the click is then stored unchecked, and storing it says whether the database answers.
   */
  async function checksWithin<T>(checking: () => Promise<T>, budgetMs: number, proposalId: string): Promise<Settled<T>> {
    try {
      return await settleInBudget(checking, budgetMs);
    } catch (error) {
      options.logger().warn({ err: error, proposalId }, 'Discord click checks failed');
      return { settled: false };
    }
  }

  async function onButton(meta: InteractionMeta, decider: Decider, customId: string, budgetMs: number): Promise<InteractionReply> {
    const target = parseCustomId(customId);
    if (!target) return ephemeral('twokey does not know this button.');
    const { action, proposalId } = target;
    // Started only when awaited: in a burst the checks are left to the decision (on PGlite a query
    // holds this thread, so a check started now would delay the answers behind it).
    const checking = startedOnce(() => checkClick(action, proposalId, decider));
    const checked = await checksWithin(checking, budgetMs, proposalId);
    if (!checked.settled) {
      // A burst of clicks, or the database is slow right now: acknowledge in time, and let the outcome follow.
      if (budgetMs > 0) options.logger().warn({ proposalId, action, budgetMs }, 'Discord click checks exceeded the answer budget; acknowledging first');
      // The modals' submits run the full checks, so opening one unchecked lets nobody through.
      if (action === 'reject') return { response: rejectModal(proposalId, undefined) };
      if (action === 'grant') return grantModalUnchecked(proposalId);
      return stored(meta, { action, proposalId, decider });
    }
    const { refusal, proposal } = checked.value;
    if (refusal) return ephemeral(refusal);
    if (action === 'reject') return { response: rejectModal(proposalId, proposal?.operation) };
    if (action === 'grant')
      return proposal
        ? { response: grantModal(proposalId, proposal.operation, grantDurations(proposal.operation)) }
        : ephemeral(`twokey has no such proposal. ${NOTHING_CHANGED}`);
    return stored(meta, { action, proposalId, decider });
  }

  /** A submitted form: checked like its button (a refusal is the answer when the checks are quick), then stored. */
  async function onForm(
    meta: InteractionMeta,
    decision: Extract<DiscordDecision, { action: 'reject' | 'grant' }>,
    budgetMs: number,
  ): Promise<InteractionReply> {
    const checked = await checksWithin(() => checkClick(decision.action, decision.proposalId, decision.decider), budgetMs, decision.proposalId);
    if (checked.settled && checked.value.refusal) return ephemeral(checked.value.refusal);
    return stored(meta, decision);
  }

  async function onModal(meta: InteractionMeta, decider: Decider, customId: string, fields: ModalFields, budgetMs: number): Promise<InteractionReply> {
    const target = parseCustomId(customId);
    if (target?.action === 'reject') {
      const reason = fields.get(REASON_INPUT);
      return onForm(meta, { action: 'reject', proposalId: target.proposalId, decider, reason: typeof reason === 'string' ? reason : null }, budgetMs);
    }
    if (target?.action === 'grant') {
      const form = readGrantForm(fields);
      if ('malformed' in form) throw new TwokeyError('invalid_request', form.malformed);
      if ('refusal' in form) return ephemeral(`${form.refusal} ${NOTHING_CHANGED}`);
      const grant: GrantRequest = form.request;
      return onForm(
        meta,
        {
          action: 'grant',
          proposalId: target.proposalId,
          decider,
          grant: { durationMs: grant.durationMs, maxUses: grant.maxUses ?? null, bounded: grant.bounded ?? false },
        },
        budgetMs,
      );
    }
    return ephemeral('twokey does not know this form.');
  }

  /**
   * `budgetMs`: how long the checks may hold the answer. A lone click waits for them, so a refusal
   * can be the answer itself; in a burst each would wait behind the others' checks, so every click
   * is stored and acknowledged at once and its outcome follows.
   */
  async function answer(interaction: Exclude<ParsedInteraction, { kind: 'malformed' }>, budgetMs: number): Promise<InteractionReply> {
    if (interaction.kind === 'ping') return { response: { type: InteractionResponseType.Pong } };
    const { meta } = interaction;
    if (interaction.kind === 'other') return ephemeral('twokey only handles its own Approve, Approve for…, Reject and Retry buttons.');
    // Marked before any await, so identical interactions arriving together are handled once.
    if (!recent.add(meta.id)) return { response: DEFERRED_UPDATE };
    if (!meta.decider) return ephemeral('twokey could not tell who you are, so nothing changed.');
    if (interaction.kind === 'component') return onButton(meta, meta.decider, interaction.customId, budgetMs);
    return onModal(meta, meta.decider, interaction.customId, interaction.fields, budgetMs);
  }

  /**
   * Returns the response for one interaction; null when the payload is not an interaction at all.
   * Throws an `invalid_request` TwokeyError (a 400 over HTTP) for one no Discord client would send.
   * A decision is stored before this resolves: the response may go out.
   */
  async function handle(payload: unknown): Promise<InteractionReply | null> {
    const interaction = parseInteraction(payload);
    if (!interaction) return null;
    if (interaction.kind === 'malformed') throw new TwokeyError('invalid_request', interaction.problem);
    return scheduler.whileAnswering((quiet) => answer(interaction, quiet ? ackBudgetMs : 0));
  }

  return {
    handle,
    /** The response is on its way: the click it stored is decided now. */
    afterAnswer(reply: InteractionReply): void {
      if (reply.stored !== undefined) services.inbox.wake(DISCORD_CLICK_JOB);
    },
    /**
     * The response never reached Discord (the gateway's callback failed): the clicker was shown
     * "interaction failed", so the stored click is taken back unless a worker already started it.
     */
    async withdraw(reply: InteractionReply): Promise<boolean> {
      return reply.stored === undefined ? false : services.inbox.withdraw(reply.stored);
    },
    /** The outbox handler for stored clicks. */
    decideClick: createDiscordClickJob({ services, botToken: options.botToken, logger: options.logger, followUp }),
  };
}

export type InteractionHandler = ReturnType<typeof createInteractionHandler>;
