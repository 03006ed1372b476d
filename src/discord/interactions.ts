import {
  ComponentType,
  InteractionResponseType,
  InteractionType,
  MessageFlags,
  Routes,
  TextInputStyle,
  type APIInteractionResponse,
  type REST,
} from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { isTwokeyError } from '../core/errors.js';
import type { Clock, Decider, ProposalRecord, ProposalStatus } from '../core/model.js';
import type { Store } from '../core/ports.js';
import { deciderRefusal, type ProposalService } from '../core/proposals.js';
import { customIdFor, parseCustomId, type DiscordAction } from './message.js';
import { describeRestFailure, withDeadline } from './rest.js';

/** What an interaction needs answered, wherever it came from (HTTP or the gateway). */
export interface InteractionReply {
  response: APIInteractionResponse;
  /**
   * The decision itself. It runs after the response is sent: Discord drops an interaction that is not
   * answered within 3 seconds, and an approval can run the operation, which may take longer.
   */
  after?: () => Promise<void>;
}

interface InteractionMeta {
  id: string;
  token: string;
  applicationId: string;
  decider: Decider | null;
}

type ParsedInteraction =
  | { kind: 'ping' }
  | { kind: 'component'; meta: InteractionMeta; customId: string }
  | { kind: 'modal'; meta: InteractionMeta; customId: string; reason: string | null }
  | { kind: 'other'; meta: InteractionMeta };

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const stringAt = (record: Record<string, unknown> | undefined, key: string): string | undefined =>
  typeof record?.[key] === 'string' ? record[key] : undefined;
const recordAt = (record: Record<string, unknown> | undefined, key: string): Record<string, unknown> | undefined =>
  isRecord(record?.[key]) ? record[key] : undefined;

const SNOWFLAKE = /^\d{17,20}$/;

/**
 * Who clicked, as twokey identities. The roles come from the interaction itself (Discord signs the
 * HTTP request; the gateway is an authenticated connection), so no extra API call and no cache that
 * could be stale.
 */
function deciderOf(interaction: Record<string, unknown>): Decider | null {
  const member = recordAt(interaction, 'member');
  const userId = stringAt(recordAt(member, 'user'), 'id') ?? stringAt(recordAt(interaction, 'user'), 'id');
  if (!userId || !SNOWFLAKE.test(userId)) return null;
  const roles = Array.isArray(member?.roles) ? member.roles.filter((r): r is string => typeof r === 'string' && SNOWFLAKE.test(r)) : [];
  const guildId = stringAt(interaction, 'guild_id');
  // Discord leaves @everyone (whose id is the guild's) out of member.roles; a config may still name it.
  if (member && guildId && SNOWFLAKE.test(guildId)) roles.push(guildId);
  return { identity: `discord:user:${userId}`, memberOf: roles.map((role) => `discord:role:${role}`), via: 'discord' };
}

/** The reason typed in the reject modal, found in either modal layout (label or legacy action row). */
function submittedValue(components: unknown, customId: string): string | null {
  if (!Array.isArray(components)) return null;
  for (const component of components) {
    if (!isRecord(component)) continue;
    if (component.custom_id === customId && typeof component.value === 'string') return component.value;
    const nested = submittedValue(component.components, customId) ?? submittedValue(component.component ? [component.component] : [], customId);
    if (nested !== null) return nested;
  }
  return null;
}

/** Narrows an untrusted payload to the few fields twokey reads; null when it is not an interaction. */
export function parseInteraction(payload: unknown): ParsedInteraction | null {
  if (!isRecord(payload) || typeof payload.type !== 'number') return null;
  if (payload.type === InteractionType.Ping) return { kind: 'ping' };
  const id = stringAt(payload, 'id');
  const token = stringAt(payload, 'token');
  const applicationId = stringAt(payload, 'application_id');
  if (!id || !token || !applicationId || !SNOWFLAKE.test(applicationId)) return null;
  const meta: InteractionMeta = { id, token, applicationId, decider: deciderOf(payload) };
  const data = recordAt(payload, 'data');
  const customId = stringAt(data, 'custom_id');
  if (payload.type === InteractionType.MessageComponent && customId) return { kind: 'component', meta, customId };
  if (payload.type === InteractionType.ModalSubmit && customId) {
    return { kind: 'modal', meta, customId, reason: submittedValue(data?.components, REASON_INPUT) };
  }
  return { kind: 'other', meta };
}

const REASON_INPUT = 'reason';

/**
 * A burst of clicks is over once none has arrived for this long. Long enough that a loaded machine
 * reading a burst slowly does not see lulls inside it; short enough that a lone click's decision
 * (and its message edit) follows within a fraction of a second.
 */
const DEFAULT_BURST_GAP_MS = 250;

const ephemeral = (content: string): InteractionReply => ({
  response: {
    type: InteractionResponseType.ChannelMessageWithSource,
    data: { content, flags: MessageFlags.Ephemeral, allowed_mentions: { parse: [] } },
  },
});

// Acknowledges a click without changing the message now; the message is edited by chat sync.
const DEFERRED_UPDATE: APIInteractionResponse = { type: InteractionResponseType.DeferredMessageUpdate };

const statusWords: Record<ProposalStatus, string> = {
  pending: 'still pending',
  approved: 'already approved',
  executing: 'being executed right now',
  committed: 'already committed',
  rejected: 'already rejected',
  expired: 'expired',
  cancelled: 'cancelled by the agent',
};

/** The private explanation for a refused decision. The core's code decides; the words are Discord's. */
export function explainRefusal(error: unknown): string {
  if (!isTwokeyError(error)) return 'twokey could not record your decision because of an internal error. Try again in a moment.';
  switch (error.code) {
    case 'not_an_approver':
      return 'You are not on the approvers list of this operation, so nothing changed.';
    case 'owner_cannot_approve':
      return 'You own the agent that proposed this, and nobody decides on their own agent\'s proposals. Nothing changed.';
    case 'not_pending':
      return 'This proposal has already been decided, so nothing changed.';
    case 'expired':
      return 'This proposal has expired, so nothing changed. The agent has to propose it again.';
    case 'not_found':
      return 'twokey has no such proposal.';
    case 'operation_removed':
      return 'This operation is no longer in twokey\'s configuration, so it can no longer be decided.';
    case 'execution_failed':
      return `The operation was run and failed (${error.message.replace(/^execution failed: /, '')}). It is still approved: press Retry to run it again.`;
    default:
      return 'twokey could not record your decision. Try again in a moment.';
  }
}

/** The narrow slice of twokey a click needs (so a unit test can pass plain fakes). */
export interface InteractionServices {
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'retry'>;
  store: Pick<Store, 'getProposal' | 'getAgent' | 'listApprovals'>;
  operation(name: string): { name: string; approval: { approvers: readonly string[] } } | undefined;
  clock: Clock;
}

export interface InteractionHandlerOptions {
  services: InteractionServices;
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

/** Starts `work` the first time it is called; later calls get the same promise. */
function startedOnce<T>(work: () => Promise<T>): () => Promise<T> {
  let started: Promise<T> | undefined;
  return () => (started ??= work());
}

type Settled<T> = { settled: true; value: T } | { settled: false };

/** Waits for `work` at most `ms`; the work itself goes on either way. */
async function settleWithin<T>(work: Promise<T>, ms: number): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<Settled<T>>((resolve) => {
    timer = setTimeout(() => resolve({ settled: false }), ms);
  });
  try {
    return await Promise.race([work.then((value): Settled<T> => ({ settled: true, value })), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A bounded set of the interaction ids seen lately, oldest evicted first. Discord does not resend an
 * interaction, but a proxy, a retried HTTP delivery or a gateway replay might; the core is idempotent
 * anyway (row lock + unique approval), this only saves the work. In memory and per process: ids that
 * reach two replicas are handled by the core's idempotency.
 */
class RecentIds {
  private readonly ids = new Set<string>();
  constructor(private readonly capacity: number) {}

  /** True the first time an id is offered. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.capacity) {
      const oldest = this.ids.values().next();
      if (!oldest.done) this.ids.delete(oldest.value);
    }
    return true;
  }
}

/** One interaction handler shared by the HTTP endpoint and the gateway. */
export function createInteractionHandler(options: InteractionHandlerOptions) {
  const { services, rest } = options;
  const recent = new RecentIds(options.recentIdsCapacity ?? 10_000);
  const inFlight = new Set<Promise<void>>();
  const waiting: Array<{ start: () => void; queuedAt: number }> = [];
  let running = 0;
  let recheck: NodeJS.Timeout | null = null;
  /** Interactions being checked before their response; with `lastClickAt`, tells a burst from a lull. */
  let answering = 0;
  let lastClickAt = 0;
  /** While stop() waits, decisions start without waiting for a lull. */
  let draining = 0;
  const followUpDeadlineMs = options.followUpDeadlineMs ?? 10_000;
  const ackBudgetMs = options.ackBudgetMs ?? 50;
  const burstGapMs = options.burstGapMs ?? DEFAULT_BURST_GAP_MS;
  const workConcurrency = options.workConcurrency ?? 4;
  const maxDecisionDelayMs = options.maxDecisionDelayMs ?? 1_000;

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

  /**
   * The same checks the core makes, read without locks, so a refusal can be the interaction's own
   * (ephemeral) response. The core checks again under the row lock; this only decides the reply.
   */
  async function checkClick(action: DiscordAction, proposalId: string, decider: Decider): Promise<{ refusal: string | null; operation?: string }> {
    const proposal = await services.store.getProposal(proposalId);
    if (!proposal) return { refusal: 'twokey has no such proposal.' };
    return { refusal: await refusalFor(action, proposal, decider), operation: proposal.operation };
  }

  async function refusalFor(action: DiscordAction, proposal: ProposalRecord, decider: Decider): Promise<string | null> {
    const operation = services.operation(proposal.operation);
    if (!operation) return 'This operation is no longer in twokey\'s configuration, so it can no longer be decided.';
    const agent = (await services.store.getAgent(proposal.agentId)) ?? { name: proposal.agentId, owners: [] };
    const refusal = deciderRefusal(operation, agent, decider);
    if (refusal?.code === 'owner_cannot_approve') {
      return `You own the agent "${agent.name}" that proposed this, and nobody decides on their own agent's proposals. Nothing changed.`;
    }
    if (refusal) return `You are not on the approvers list of "${operation.name}" (by user or by role), so nothing changed.`;
    if (action === 'retry') {
      return proposal.status === 'approved' && proposal.error ? null : `There is nothing to retry: this proposal is ${statusWords[proposal.status]}.`;
    }
    if (proposal.status !== 'pending') return `This proposal is ${statusWords[proposal.status]}, so nothing changed.`;
    if (services.clock().getTime() >= proposal.expiresAt.getTime()) {
      return 'This proposal has expired, so nothing changed. The agent has to propose it again.';
    }
    if (action === 'approve') {
      const approvals = await services.store.listApprovals(proposal.id);
      if (approvals.some((a) => a.approver === decider.identity)) {
        return `Your approval is already counted (${approvals.length} of ${proposal.quorum}).`;
      }
    }
    return null;
  }

  /** Runs a decision after the response; a refusal found only then (a race) becomes a follow-up. */
  function decideLater(meta: InteractionMeta, proposalId: string, decide: () => Promise<unknown>): () => Promise<void> {
    return async () => {
      try {
        await decide();
      } catch (error) {
        if (!isTwokeyError(error)) {
          options.logger().error({ err: error, proposalId, interactionId: meta.id }, 'Discord decision failed');
        }
        await followUp(meta, explainRefusal(error));
      }
    };
  }

  function rejectModal(proposalId: string, operation: string | undefined): InteractionReply {
    return {
      response: {
        type: InteractionResponseType.Modal,
        data: {
          custom_id: customIdFor('reject', proposalId),
          // Discord caps modal titles at 45 characters.
          title: (operation ? `Reject ${operation}` : 'Reject this proposal').slice(0, 45),
          components: [
            {
              type: ComponentType.Label,
              label: 'Reason',
              description: 'Optional. The agent and this channel will see it.',
              component: { type: ComponentType.TextInput, custom_id: REASON_INPUT, style: TextInputStyle.Paragraph, required: false, max_length: 500 },
            },
          ],
        },
      },
    };
  }

  async function onButton(meta: InteractionMeta, decider: Decider, customId: string, budgetMs: number): Promise<InteractionReply> {
    const target = parseCustomId(customId);
    if (!target) return ephemeral('twokey does not know this button.');
    const { action, proposalId } = target;
    const decide =
      action === 'approve'
        ? () => services.proposals.approve(proposalId, decider)
        : () => services.proposals.retry(proposalId, decider);
    // Started only when awaited: in a burst the checks wait until every answer is out (on PGlite a
    // query holds this thread, so a check started now would delay the answers behind it).
    const checking = startedOnce(() => checkClick(action, proposalId, decider));
    const checked = budgetMs > 0 ? await settleWithin(checking(), budgetMs) : ({ settled: false } as const);
    if (!checked.settled) {
      // A burst of clicks, or the database is slow right now: acknowledge in time, and let the outcome follow.
      if (budgetMs > 0) options.logger().warn({ proposalId, action, budgetMs }, 'Discord click checks exceeded the answer budget; acknowledging first');
      // The modal's submit runs the full checks, so opening it unchecked lets nobody through.
      if (action === 'reject') return rejectModal(proposalId, undefined);
      return {
        response: DEFERRED_UPDATE,
        after: async () => {
          let refusal: string | null;
          try {
            ({ refusal } = await checking());
          } catch (error) {
            options.logger().error({ err: error, proposalId, interactionId: meta.id }, 'Discord click checks failed');
            return followUp(meta, explainRefusal(error));
          }
          if (refusal) return followUp(meta, refusal);
          return decideLater(meta, proposalId, decide)();
        },
      };
    }
    const { refusal, operation } = checked.value;
    if (refusal) return ephemeral(refusal);
    if (action === 'reject') return rejectModal(proposalId, operation);
    return { response: DEFERRED_UPDATE, after: decideLater(meta, proposalId, decide) };
  }

  async function onModal(meta: InteractionMeta, decider: Decider, customId: string, reason: string | null, budgetMs: number): Promise<InteractionReply> {
    const target = parseCustomId(customId);
    if (target?.action !== 'reject') return ephemeral('twokey does not know this form.');
    const { proposalId } = target;
    // One short transaction and no execution, so usually done before answering: a refusal is then the answer itself.
    const rejecting = startedOnce(() =>
      services.proposals.reject(proposalId, decider, reason).then(
        () => null,
        (error: unknown) => {
          if (!isTwokeyError(error)) options.logger().error({ err: error, proposalId }, 'Discord rejection failed');
          return explainRefusal(error);
        },
      ),
    );
    const rejected = budgetMs > 0 ? await settleWithin(rejecting(), budgetMs) : ({ settled: false } as const);
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

  /**
   * `budgetMs`: how long the checks may hold the answer. A lone click waits for them, so a refusal
   * can be the answer itself; in a burst each would wait behind the others' checks, so every click
   * is acknowledged at once and its outcome follows.
   */
  async function answer(interaction: ParsedInteraction, budgetMs: number): Promise<InteractionReply> {
    if (interaction.kind === 'ping') return { response: { type: InteractionResponseType.Pong } };
    const { meta } = interaction;
    if (interaction.kind === 'other') return ephemeral('twokey only handles its own Approve, Reject and Retry buttons.');
    // Marked before any await, so identical interactions arriving together are handled once.
    if (!recent.add(meta.id)) return { response: DEFERRED_UPDATE };
    if (!meta.decider) return ephemeral('twokey could not tell who you are, so nothing changed.');
    if (interaction.kind === 'component') return onButton(meta, meta.decider, interaction.customId, budgetMs);
    return onModal(meta, meta.decider, interaction.customId, interaction.reason, budgetMs);
  }

  /** Returns the response for one interaction; null when the payload is not an interaction at all. */
  async function handle(payload: unknown): Promise<InteractionReply | null> {
    const interaction = parseInteraction(payload);
    if (!interaction) return null;
    const now = Date.now();
    const budgetMs = isQuiet(now) ? ackBudgetMs : 0;
    answering += 1;
    lastClickAt = now;
    try {
      return await answer(interaction, budgetMs);
    } finally {
      answering -= 1;
      startWaiting();
    }
  }

  /** No click is being answered and none arrived in the last `burstGapMs`: not in a burst. */
  function isQuiet(now: number): boolean {
    return answering === 0 && now - lastClickAt >= burstGapMs;
  }

  /**
   * Responses come first: they have Discord's 3 seconds, a decision has none, and both share one event
   * loop and (on PGlite) one database queue. During a burst of clicks decisions wait, and only one runs at a time once the oldest has waited
   * `maxDecisionDelayMs`, so a steady stream of clicks cannot starve them; when quiet, up to
   * `workConcurrency` run.
   */
  function startWaiting(): void {
    const quiet = draining > 0 || isQuiet(Date.now());
    const limit = quiet ? workConcurrency : 1;
    while (waiting.length > 0 && running < limit) {
      const [oldest] = waiting;
      if (!oldest || (!quiet && Date.now() - oldest.queuedAt < maxDecisionDelayMs)) break;
      waiting.shift();
      oldest.start();
    }
    if (waiting.length > 0 && running < workConcurrency && !recheck) {
      // Look again once the burst could be over or the oldest decision has waited long enough;
      // at least 10 ms, so a gap of 0 (tests) does not spin.
      recheck = setTimeout(() => {
        recheck = null;
        startWaiting();
      }, Math.max(10, Math.min(burstGapMs, maxDecisionDelayMs)));
      recheck.unref();
    }
  }

  /**
   * Queues a reply's deferred work (at most `workConcurrency` at once), tracked so that stop() can wait
   * for it before the database closes.
   */
  function runAfter(reply: InteractionReply): void {
    const work = reply.after;
    if (!work) return;
    let finish = () => {};
    const finished = new Promise<void>((resolve) => (finish = resolve));
    inFlight.add(finished);
    const start = () => {
      running += 1;
      work()
        .catch((error: unknown) => options.logger().error({ err: error }, 'Discord interaction work failed'))
        .finally(() => {
          running -= 1;
          inFlight.delete(finished);
          finish();
          startWaiting();
        });
    };
    waiting.push({ start, queuedAt: Date.now() });
    // After the I/O already waiting (clicks not yet read count as clicks being checked).
    setImmediate(startWaiting);
  }

  async function drain(): Promise<void> {
    draining += 1;
    try {
      startWaiting();
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    } finally {
      draining -= 1;
    }
  }

  return { handle, runAfter, drain };
}

export type InteractionHandler = ReturnType<typeof createInteractionHandler>;
