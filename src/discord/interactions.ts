import { InteractionResponseType, type REST } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { NOTHING_CHANGED } from '../core/decision-preview.js';
import { isTwokeyError, TwokeyError } from '../core/errors.js';
import type { GrantRequest } from '../core/grant-service.js';
import type { Decider } from '../core/model.js';
import { createBurstScheduler, DEFAULT_BURST_GAP_MS, RecentIds, settleInBudget, startedOnce } from './burst-scheduler.js';
import { createClickChecks } from './click-checks.js';
import { parseInteraction, type InteractionMeta, type ModalFields, type ParsedInteraction } from './interaction-payload.js';
import { parseCustomId } from './message.js';
import type { DiscordServices } from './ports.js';
import { grantModal, readGrantForm, REASON_INPUT, rejectModal } from './modals.js';
import { createPrivateReplies, DEFERRED_UPDATE, ephemeral, explainRefusal, type InteractionReply } from './private-replies.js';

export { parseInteraction } from './interaction-payload.js';
export { explainRefusal, type InteractionReply } from './private-replies.js';

export interface InteractionHandlerOptions {
  services: DiscordServices;
  rest: REST;
  logger: () => FastifyBaseLogger;
  /** Interaction ids remembered for de-duplication (per process). */
  recentIdsCapacity?: number;
  /** Deadline of a follow-up message. */
  followUpDeadlineMs?: number;
  /**
   * How long the checks before a response may take. Discord drops an interaction not answered within
   * 3 s (transit included); past this budget the click is acknowledged anyway and the outcome follows.
   */
  ackBudgetMs?: number;
  /**
   * Clicks closer together than this (or arriving while another is being answered) form a burst.
   * During one, every click is answered at once with its checks after the answer, and decisions wait
   * for the lull. Default 250 ms.
   */
  burstGapMs?: number;
  /**
   * Decisions running at once after their responses. Bounded so a burst of clicks cannot queue so much
   * database work that the next clicks' checks miss Discord's 3 seconds; the rest wait their turn.
   */
  workConcurrency?: number;
  /** Longest a decision waits for a lull in clicks before it runs anyway. */
  maxDecisionDelayMs?: number;
}

/** One interaction handler shared by the HTTP endpoint and the gateway. */
export function createInteractionHandler(options: InteractionHandlerOptions) {
  const { services } = options;
  const recent = new RecentIds(options.recentIdsCapacity ?? 10_000);
  const { checkClick, grantDurations } = createClickChecks(services);
  const { followUp, decideLater, checkThenDecide } = createPrivateReplies({
    rest: options.rest,
    logger: options.logger,
    followUpDeadlineMs: options.followUpDeadlineMs ?? 10_000,
  });
  const ackBudgetMs = options.ackBudgetMs ?? 50;
  const scheduler = createBurstScheduler({
    burstGapMs: options.burstGapMs ?? DEFAULT_BURST_GAP_MS,
    workConcurrency: options.workConcurrency ?? 4,
    maxDecisionDelayMs: options.maxDecisionDelayMs ?? 1_000,
    onWorkError: (error) => options.logger().error({ err: error }, 'Discord interaction work failed'),
  });

  /** "Approve for…" whose checks ran late: the form opens unchecked (its submission is checked in full). */
  async function grantModalUnchecked(proposalId: string): Promise<InteractionReply> {
    try {
      const proposal = await services.store.getProposal(proposalId);
      if (!proposal) throw new TwokeyError('not_found', `no proposal ${proposalId}`);
      return { response: grantModal(proposalId, proposal.operation, grantDurations(proposal.operation)) };
    } catch (error) {
      if (!isTwokeyError(error)) options.logger().error({ err: error, proposalId }, 'Discord grant form failed');
      return ephemeral(explainRefusal(error, 'approve'));
    }
  }

  async function onButton(meta: InteractionMeta, decider: Decider, customId: string, budgetMs: number): Promise<InteractionReply> {
    const target = parseCustomId(customId);
    if (!target) return ephemeral('twokey does not know this button.');
    const { action, proposalId } = target;
    const decide = action === 'approve' ? () => services.proposals.approve(proposalId, decider) : () => services.proposals.retry(proposalId, decider);
    // Started only when awaited: in a burst the checks wait until every answer is out (on PGlite a
    // query holds this thread, so a check started now would delay the answers behind it).
    const checking = startedOnce(() => checkClick(action, proposalId, decider));
    const checked = await settleInBudget(checking, budgetMs);
    if (!checked.settled) {
      // A burst of clicks, or the database is slow right now: acknowledge in time, and let the outcome follow.
      if (budgetMs > 0) options.logger().warn({ proposalId, action, budgetMs }, 'Discord click checks exceeded the answer budget; acknowledging first');
      // The modals' submits run the full checks, so opening one unchecked lets nobody through.
      if (action === 'reject') return { response: rejectModal(proposalId, undefined) };
      if (action === 'grant') return grantModalUnchecked(proposalId);
      return checkThenDecide(meta, proposalId, action, checking, decide);
    }
    const { refusal, proposal } = checked.value;
    if (refusal) return ephemeral(refusal);
    if (action === 'reject') return { response: rejectModal(proposalId, proposal?.operation) };
    if (action === 'grant')
      return proposal
        ? { response: grantModal(proposalId, proposal.operation, grantDurations(proposal.operation)) }
        : ephemeral(`twokey has no such proposal. ${NOTHING_CHANGED}`);
    return { response: DEFERRED_UPDATE, after: decideLater(meta, proposalId, action, decide) };
  }

  async function onRejectForm(meta: InteractionMeta, decider: Decider, proposalId: string, reason: string | null, budgetMs: number): Promise<InteractionReply> {
    // One short transaction and no execution, so usually done before answering: a refusal is then the answer itself.
    const rejecting = startedOnce(() =>
      services.proposals.reject(proposalId, decider, reason).then(
        () => null,
        (error: unknown) => {
          if (!isTwokeyError(error)) options.logger().error({ err: error, proposalId }, 'Discord rejection failed');
          return explainRefusal(error, 'reject');
        },
      ),
    );
    const rejected = await settleInBudget(rejecting, budgetMs);
    if (!rejected.settled) {
      return {
        response: DEFERRED_UPDATE,
        after: async () => {
          const refusal = await rejecting();
          if (refusal) await followUp(meta, refusal);
        },
      };
    }
    return rejected.value ? ephemeral(rejected.value) : { response: DEFERRED_UPDATE };
  }

  /** The grant form's submission: checked like an Approve click, then approved and granted after the answer. */
  async function onGrantForm(meta: InteractionMeta, decider: Decider, proposalId: string, fields: ModalFields, budgetMs: number): Promise<InteractionReply> {
    const form = readGrantForm(fields);
    if ('malformed' in form) throw new TwokeyError('invalid_request', form.malformed);
    if ('refusal' in form) return ephemeral(`${form.refusal} ${NOTHING_CHANGED}`);
    const request: GrantRequest = form.request;
    const decide = async () => {
      if (!services.grants) throw new TwokeyError('invalid_request', 'This operation does not allow approving for a while');
      const { grant } = await services.grants.approveAndGrant(proposalId, decider, request);
      options.logger().info({ proposalId, approver: decider.identity, grantId: grant.id }, 'Discord approval with a grant');
    };
    const checking = startedOnce(() => checkClick('grant', proposalId, decider));
    const checked = await settleInBudget(checking, budgetMs);
    if (!checked.settled) return checkThenDecide(meta, proposalId, 'approve', checking, decide);
    if (checked.value.refusal) return ephemeral(checked.value.refusal);
    return { response: DEFERRED_UPDATE, after: decideLater(meta, proposalId, 'approve', decide) };
  }

  async function onModal(meta: InteractionMeta, decider: Decider, customId: string, fields: ModalFields, budgetMs: number): Promise<InteractionReply> {
    const target = parseCustomId(customId);
    if (target?.action === 'reject') {
      const reason = fields.get(REASON_INPUT);
      return onRejectForm(meta, decider, target.proposalId, typeof reason === 'string' ? reason : null, budgetMs);
    }
    if (target?.action === 'grant') return onGrantForm(meta, decider, target.proposalId, fields, budgetMs);
    return ephemeral('twokey does not know this form.');
  }

  /**
   * `budgetMs`: how long the checks may hold the answer. A lone click waits for them, so a refusal
   * can be the answer itself; in a burst each would wait behind the others' checks, so every click
   * is acknowledged at once and its outcome follows.
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
   */
  async function handle(payload: unknown): Promise<InteractionReply | null> {
    const interaction = parseInteraction(payload);
    if (!interaction) return null;
    if (interaction.kind === 'malformed') throw new TwokeyError('invalid_request', interaction.problem);
    return scheduler.whileAnswering((quiet) => answer(interaction, quiet ? ackBudgetMs : 0));
  }

  /** Queues a reply's deferred work, tracked so that stop() can wait for it before the database closes. */
  function runAfter(reply: InteractionReply): void {
    if (reply.after) scheduler.runAfter(reply.after);
  }

  return { handle, runAfter, drain: scheduler.drain };
}

export type InteractionHandler = ReturnType<typeof createInteractionHandler>;
