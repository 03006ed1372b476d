import type { ChatPlatformName, FollowUpKind } from './jobs.js';
import { approversOf, type Clock, type OperationSpec, type ProposalRecord } from './model.js';
import type { Store } from './ports.js';
import { createTransitions } from './transitions.js';

/**
 * Bringing people back to a request that waits: reminders (`approval.remind`) and escalation
 * (`approval.escalate`). Each runs from an outbox job queued at propose time with its `runAt`;
 * each checks, under the proposal's row lock, that the proposal still waits, records itself on the
 * proposal and in the audit log, and settles like every other change: its jobs (the message
 * edited, then the ping next to it: a thread reply in Slack, a reply in Discord) come from
 * `jobsForChange` (effects.ts), in the same transaction. A proposal nobody decides still ends
 * `expired`: silence is never consent.
 */

export interface FollowUpDeps {
  store: Store;
  clock: Clock;
  operation(name: string): OperationSpec | undefined;
  /** The chat platforms wired in, by name (see `TransitionDeps.chatPlatforms`). */
  chatPlatforms?: ReadonlySet<ChatPlatformName>;
  onChange?(proposal: ProposalRecord): void;
}

export function createFollowUpService(deps: FollowUpDeps) {
  const { store, clock } = deps;
  const { settle, announce } = createTransitions(deps);

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
      if (kind === 'remind') {
        updated = tx.updateProposal(proposal, { reminders: proposal.reminders + 1, updatedAt: now });
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
        updated = tx.updateProposal(proposal, { approvers: [...awaiting, ...added], escalatedAt: now, updatedAt: now });
        mention = escalate.approvers;
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
      return settle(tx, updated, { type: 'followed_up', followUp: { kind, mention } });
    });
    return changed && announce(changed);
  }

  return {
    remind: (proposalId: string, index: number) => followUp(proposalId, 'remind', index),
    escalate: (proposalId: string) => followUp(proposalId, 'escalate'),
  };
}

export type FollowUpService = ReturnType<typeof createFollowUpService>;
