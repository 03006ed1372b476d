import { approversOf, type Clock, type OperationSpec, type ProposalRecord } from './model.js';
import type { OutboxJobSpec, Store } from './ports.js';

/**
 * Bringing people back to a request that waits: reminders (`approval.remind`) and escalation
 * (`approval.escalate`). Each runs from an outbox job queued at propose time with its `runAt`;
 * each checks, under the proposal's row lock, that the proposal still waits, records itself on the
 * proposal and in the audit log, and queues the chat follow-up (a thread reply in Slack, a reply in
 * Discord) in the same transaction. A proposal nobody decides still ends `expired`: silence is
 * never consent.
 */

export const CHAT_FOLLOW_UP_JOB = 'chat.followup';

export interface FollowUpDeps {
  store: Store;
  clock: Clock;
  operation(name: string): OperationSpec | undefined;
  effects?(proposal: ProposalRecord): OutboxJobSpec[];
  onChange?(proposal: ProposalRecord): void;
}

export type FollowUpKind = 'remind' | 'escalate';

export function createFollowUpService(deps: FollowUpDeps) {
  const { store, clock } = deps;

  /** The chat jobs: the message edited (reminders and escalation show on it), then the ping after it. */
  function chatJobs(proposal: ProposalRecord, kind: FollowUpKind, mention: string[], channel: { slack?: string; discord?: string }): OutboxJobSpec[] {
    const jobs = deps.effects?.(proposal) ?? [];
    const pings = jobs
      .filter((job) => job.kind === 'chat.sync')
      .map((job) => {
        const platform = job.payload.platform as 'slack' | 'discord';
        return {
          kind: CHAT_FOLLOW_UP_JOB,
          payload: { proposalId: proposal.id, platform, kind, mention, channel: channel[platform] ?? null },
          ...(job.orderingKey ? { orderingKey: job.orderingKey } : {}),
        };
      });
    return [...jobs, ...pings];
  }

  async function followUp(proposalId: string, kind: FollowUpKind, index = 0): Promise<ProposalRecord | null> {
    const now = clock();
    const changed = await store.transaction(async (tx) => {
      const proposal = await tx.lockProposal(proposalId);
      if (!proposal || proposal.status !== 'pending' || now.getTime() >= proposal.expiresAt.getTime()) return null;
      const operation = deps.operation(proposal.operation);
      if (!operation) return null;
      const awaiting = approversOf(proposal, operation);
      let updated: ProposalRecord;
      let mention: string[];
      let channel: { slack?: string; discord?: string } = {};
      if (kind === 'remind') {
        updated = await tx.updateProposal(proposal.id, { reminders: proposal.reminders + 1, updatedAt: now });
        mention = awaiting;
        await tx.appendAudit(
          {
            type: 'proposal.reminded',
            actor: 'system',
            proposalId: proposal.id,
            agentId: proposal.agentId,
            data: { reminder: index + 1, approvers: awaiting },
          },
          now,
        );
      } else {
        const escalate = operation.approval.escalate;
        if (!escalate || proposal.escalatedAt) return null;
        const added = escalate.approvers.filter((identity) => !awaiting.includes(identity));
        updated = await tx.updateProposal(proposal.id, { approvers: [...awaiting, ...added], escalatedAt: now, updatedAt: now });
        mention = escalate.approvers;
        channel = { ...(escalate.slack ? { slack: escalate.slack.channel } : {}), ...(escalate.discord ? { discord: escalate.discord.channel } : {}) };
        await tx.appendAudit(
          {
            type: 'proposal.escalated',
            actor: 'system',
            proposalId: proposal.id,
            agentId: proposal.agentId,
            data: { added, approvers: [...awaiting, ...added] },
          },
          now,
        );
      }
      const jobs = chatJobs(updated, kind, mention, channel);
      if (jobs.length > 0) await tx.enqueue(jobs, now);
      await tx.notifyChange(updated.id);
      return updated;
    });
    if (changed) deps.onChange?.(changed);
    return changed;
  }

  return {
    remind: (proposalId: string, index: number) => followUp(proposalId, 'remind', index),
    escalate: (proposalId: string) => followUp(proposalId, 'escalate'),
  };
}

export type FollowUpService = ReturnType<typeof createFollowUpService>;
