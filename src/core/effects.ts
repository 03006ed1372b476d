import { channelOfPart, chatPartOf, destinationOf } from './chat-platform.js';
import type { ChatPlatformName, FollowUpKind } from './jobs.js';
import { isAutomaticDecider, isFinalStatus, type AgentRecord, type OperationSpec, type ProposalRecord } from './model.js';
import type { OutboxJobSpec } from './ports.js';

/**
 * What a proposal's state change sends to the outside world, decided in one place: the outbox jobs
 * each change queues, in the transaction of the change itself (`settle` in transitions.ts). To change
 * what happens when a proposal is proposed, decided, expired, executed or followed up, change
 * `jobsForChange` (and its job kinds in jobs.ts); nothing outside src/core/ decides it.
 */

/** What just happened to the proposal, as far as the jobs it queues depend on it. */
export type ProposalChange =
  /** Inserted (and perhaps decided at once by a rule or a grant), by `agent`. */
  | { type: 'proposed'; agent: AgentRecord }
  /** Any other change of its state: an approval counted, a decision, expiry, cancellation, an execution's outcome. */
  | { type: 'changed' }
  /** A reminder or an escalation was recorded: `mention` are the identities to ping. */
  | { type: 'followed_up'; followUp: { kind: FollowUpKind; mention: readonly string[] } };

export interface EffectsSetting {
  /** The proposal's operation as configured now; undefined once it was removed from the configuration. */
  operation: OperationSpec | undefined;
  /** The chat platforms wired into this process, by name. */
  chatPlatforms: Iterable<ChatPlatformName>;
  /** When the change is made (the time its jobs are queued at). */
  at: Date;
}

/**
 * How long the chat edit of a proposal that starts executing waits. Most executions end sooner: the
 * edit still waiting then covers their outcome too (a waiting `chat.sync` coalesces later changes),
 * so the message goes from the proposal straight to its result in one edit instead of two, a chat
 * edit, its claim and its reads fewer per approved proposal, and one edit fewer against Slack's and
 * Discord's per-channel rate limits. A longer execution shows "executing" after this long.
 */
export const EXECUTING_EDIT_DELAY_MS = 250;

/** The destination a callback job is rate-limited by, the callback URL's host (one slow receiver cannot hold the lane). */
export function callbackDestination(callbackUrl: string): string {
  try {
    return new URL(callbackUrl).host.toLowerCase();
  } catch {
    return callbackUrl;
  }
}

/** Reminder and escalation jobs for a proposal that waits for people; each checks it still waits when it runs. */
export function followUpJobs(proposal: ProposalRecord, operation: OperationSpec): OutboxJobSpec[] {
  const created = proposal.createdAt.getTime();
  const before = (ms: number) => created + ms < proposal.expiresAt.getTime();
  const jobs: OutboxJobSpec[] = (operation.approval.remindMs ?? []).filter(before).map((ms, index) => ({
    kind: 'proposal.remind',
    payload: { proposalId: proposal.id, index },
    runAt: new Date(created + ms),
  }));
  const escalate = operation.approval.escalate;
  if (escalate && before(escalate.afterMs)) {
    jobs.push({ kind: 'proposal.escalate', payload: { proposalId: proposal.id }, runAt: new Date(created + escalate.afterMs) });
  }
  return jobs;
}

/** The platforms the proposal's message lives on: wired in, and given a channel by the operation. */
function messagePlatforms(proposal: ProposalRecord, setting: EffectsSetting): ChatPlatformName[] {
  const { operation } = setting;
  // A rule or grant decided it and the operation wants no chat message for that: none at all.
  if (operation?.automaticDecisions === 'silent' && isAutomaticDecider(proposal.decidedBy)) return [];
  return [...setting.chatPlatforms].filter((platform) => destinationOf(operation?.approval, platform) !== null);
}

/**
 * The jobs a change queues, in this order: the follow-ups of a proposal left to people (at propose
 * time), the chat message brought up to date on each platform, the agent's callback once the state
 * is final, and a follow-up's ping after the message's edit (same ordering key, so it runs after it).
 */
export function jobsForChange(proposal: ProposalRecord, change: ProposalChange, setting: EffectsSetting): OutboxJobSpec[] {
  const jobs: OutboxJobSpec[] = [];
  if (change.type === 'proposed' && proposal.status === 'pending' && setting.operation) jobs.push(...followUpJobs(proposal, setting.operation));
  const platforms = messagePlatforms(proposal, setting);
  const messageKey = (platform: ChatPlatformName) => `chat:${platform}:${proposal.id}`;
  const editDelay = proposal.status === 'executing' ? { runAt: new Date(setting.at.getTime() + EXECUTING_EDIT_DELAY_MS) } : {};
  // A proposal left to people is posted as it was inserted, with no approval yet: its first post
  // can run from what this change knows (one decided at once may show a result, which is rendered
  // from the row as the database stores it).
  const firstPost =
    change.type === 'proposed' && proposal.status === 'pending' ? { firstOfItsKey: { known: { proposal, agent: change.agent, approvals: [] } } } : {};
  for (const platform of platforms) {
    jobs.push({
      kind: 'chat.sync',
      payload: { proposalId: proposal.id, platform },
      orderingKey: messageKey(platform),
      coalesce: true,
      ...editDelay,
      ...firstPost,
    });
  }
  if (proposal.callbackUrl && isFinalStatus(proposal.status)) {
    jobs.push({
      kind: 'callback.deliver',
      // The lane key is the agent and the host: one agent's hanging receiver holds its own
      // callbacks back, never another agent's to the same host (src/outbox/README.md).
      payload: {
        proposalId: proposal.id,
        status: proposal.status,
        agentId: proposal.agentId,
        destination: `${proposal.agentId} ${callbackDestination(proposal.callbackUrl)}`,
      },
      orderingKey: `callback:${proposal.id}`,
    });
  }
  if (change.type === 'followed_up') {
    const { kind, mention } = change.followUp;
    // An escalation is also posted where the operation sends escalations on that platform.
    const escalation = kind === 'escalate' ? setting.operation?.approval.escalate : undefined;
    for (const platform of platforms) {
      jobs.push({
        kind: 'chat.followup',
        payload: { proposalId: proposal.id, platform, kind, mention: [...mention], channel: channelOfPart(chatPartOf(escalation, platform)) },
        orderingKey: messageKey(platform),
      });
    }
  }
  return jobs;
}
