import type { FastifyBaseLogger } from 'fastify';
import { NOTHING_CHANGED } from '../core/decision-preview.js';
import { TwokeyError } from '../core/errors.js';
import type { JobPayloadInputs } from '../core/jobs.js';
import { INBOX_UNAVAILABLE_WORDS } from '../outbox/inbox.js';
import { TEAMS_CLICK_JOB } from './platform.js';
import { parseActivity, type ActionMeta } from './activity.js';
import type { TeamsAction } from './adaptive-card.js';
import { createClickChecks, createTeamsClickJob } from './clicks.js';
import type { TeamsServices } from './ports.js';

/**
 * The answer to an activity: an HTTP status and, for an invoke, the invoke response Teams shows the
 * clicker (`application/vnd.microsoft.activity.message`: a line under the card, to them only).
 */
export interface ActivityAnswer {
  status: number;
  body: Record<string, unknown> | null;
}

export const invokeMessage = (text: string): ActivityAnswer => ({
  status: 200,
  body: { statusCode: 200, type: 'application/vnd.microsoft.activity.message', value: text },
});

/** Said when the click is stored but its decision takes longer than the invoke may wait. */
export const RECORDED_WORDS = 'Your click is recorded; the card shows the outcome once it is decided.';

export interface InvokeHandlerOptions {
  services: TeamsServices;
  logger: () => FastifyBaseLogger;
  /**
   * How long an invoke waits for its stored click to be decided, so the outcome (or a refusal the
   * core found only then, such as a passkey step-up) is the answer itself. Teams gives up on an
   * invoke after about 5 seconds; past this the answer is RECORDED_WORDS and the card tells the rest.
   */
  answerBudgetMs: number;
  /** Activity ids remembered, to answer a repeated delivery without storing it twice. */
  recentIdsCapacity?: number;
}

const sleep = (ms: number) => new Promise<null>((resolve) => setTimeout(() => resolve(null), ms).unref());

export function createInvokeHandler(options: InvokeHandlerOptions) {
  const { services } = options;
  const { checkClick, grantDuration } = createClickChecks(services);
  const recent = new Set<string>();
  const capacity = options.recentIdsCapacity ?? 10_000;
  /** Invokes waiting for the outcome of the click they stored, by job id; and outcomes nobody waited for yet. */
  const waiting = new Map<number, (words: string) => void>();
  const early = new Map<number, string>();

  function onOutcome(jobId: number, words: string): void {
    const resolve = waiting.get(jobId);
    if (resolve) return resolve(words);
    early.set(jobId, words);
    if (early.size > 1_000) early.delete(early.keys().next().value as number);
  }

  function outcomeOf(jobId: number): Promise<string | null> {
    const known = early.get(jobId);
    if (known !== undefined) {
      early.delete(jobId);
      return Promise.resolve(known);
    }
    return Promise.race([new Promise<string>((resolve) => waiting.set(jobId, resolve)), sleep(options.answerBudgetMs)]).finally(() => waiting.delete(jobId));
  }

  function remember(id: string): boolean {
    if (recent.has(id)) return false;
    recent.add(id);
    if (recent.size > capacity) recent.delete(recent.values().next().value as string);
    return true;
  }

  async function store(meta: ActionMeta, click: JobPayloadInputs['teams.click']): Promise<number | null> {
    try {
      return await services.inbox.store({ kind: TEAMS_CLICK_JOB, payload: click, proposalId: click.proposalId });
    } catch (error) {
      options
        .logger()
        .warn({ activityId: meta.id, proposalId: click.proposalId, error: error instanceof Error ? error.message : 'unknown' }, 'Teams click not stored');
      return null;
    }
  }

  async function onAction(meta: ActionMeta, action: TeamsAction, proposalId: string, reason: string | null): Promise<ActivityAnswer> {
    const decider = meta.decider;
    if (!decider) return invokeMessage(`twokey could not tell who you are (Teams sent no Entra object id), so ${NOTHING_CHANGED.toLowerCase()}`);
    let checked: Awaited<ReturnType<typeof checkClick>>;
    try {
      checked = await checkClick(action, proposalId, decider);
    } catch (error) {
      options.logger().warn({ err: error, proposalId }, 'Teams click checks failed');
      return invokeMessage(INBOX_UNAVAILABLE_WORDS);
    }
    if (checked.refusal) return invokeMessage(checked.refusal);
    const base = {
      proposalId,
      decider: { identity: decider.identity, via: 'teams' as const },
      activityId: meta.id,
      receivedAt: services.clock().toISOString(),
    };
    const click: JobPayloadInputs['teams.click'] =
      action === 'reject'
        ? { ...base, action, reason }
        : action === 'grant'
          ? // Checked above: a proposal whose operation offers grants.
            { ...base, action, grant: { durationMs: grantDuration(checked.proposal?.operation ?? ''), maxUses: null, bounded: false } }
          : { ...base, action };
    const jobId = await store(meta, click);
    if (jobId === null) return invokeMessage(INBOX_UNAVAILABLE_WORDS);
    services.inbox.wake(TEAMS_CLICK_JOB);
    return invokeMessage((await outcomeOf(jobId)) ?? RECORDED_WORDS);
  }

  /**
   * The answer to one authenticated activity. Throws an `invalid_request` TwokeyError (a 400) for a
   * body no Bot Framework channel would send. A click is stored before this resolves.
   */
  async function handle(payload: unknown): Promise<ActivityAnswer> {
    const activity = parseActivity(payload);
    switch (activity.kind) {
      case 'malformed':
        throw new TwokeyError('invalid_request', activity.problem);
      case 'ignored':
        // Installs, conversation updates, messages to the bot: acknowledged, nothing to say.
        return { status: 200, body: null };
      case 'other-invoke':
        return invokeMessage('twokey only handles the buttons of its own approval cards.');
      case 'card-action': {
        const { meta, action, proposalId, reason } = activity;
        if (!action || !proposalId) return invokeMessage('twokey does not know this button.');
        // Marked before any await, so the same activity delivered twice at once is stored once.
        if (!remember(meta.id)) return invokeMessage(RECORDED_WORDS);
        return onAction(meta, action, proposalId, reason);
      }
    }
  }

  return {
    handle,
    /** The outbox handler for stored clicks. */
    decideClick: createTeamsClickJob({ services, logger: options.logger, onOutcome }),
  };
}

export type InvokeHandler = ReturnType<typeof createInvokeHandler>;
