import { canonicalJson, sha256Hex } from '../core/secrets.js';
import type { JobPayloads, LastWrite, ProposalSnapshot } from '../core/jobs.js';
import type { AgentRecord, ApprovalRecord, ProposalRecord } from '../core/model.js';
import type { Store } from '../core/ports.js';
import type { ChatMessageStore, TrailEvent } from './ports.js';
import { chatResultText, chatSafeText, type ChatResultSettings } from './result-text.js';
import type { ChatPublisher, ProposalMessageView } from './types.js';

export interface ChatSyncDeps {
  store: Pick<Store, 'getProposal' | 'listApprovals' | 'getAgent'>;
  messages: ChatMessageStore;
  publishers: ChatPublisher[];
  /** The chat channel an operation posts to on a platform, or undefined when it does not. */
  channelFor(operation: string, platform: ChatPublisher['platform']): string | undefined;
  describe(operation: string): string;
  /** The grant durations an operation offers approvers ([] when it allows none). */
  grantDurations?(operation: string): number[];
  /** How an operation's result reaches chat: its `result` template, or opted-in JSON (none by default). */
  resultSettings?(operation: string): ChatResultSettings;
  publicUrl?: string | undefined;
  clock: () => Date;
}

function auditLine(event: TrailEvent): string {
  const reason = typeof event.data.reason === 'string' && event.data.reason ? ` (${event.data.reason})` : '';
  const error = typeof event.data.error === 'string' ? ` (${event.data.error})` : '';
  return chatSafeText(`${event.at.toISOString()} ${event.type} by ${event.actor}${reason}${error}`);
}

/**
 * Brings a proposal's chat message up to date: posts it the first time, edits it in place after.
 * It renders the proposal's current state rather than replaying events, so running it twice, or
 * late, is harmless, and the outbox can retry it freely.
 */
export function createChatSync(deps: ChatSyncDeps) {
  async function buildView(proposal: ProposalRecord, agent: AgentRecord | null, known?: readonly ApprovalRecord[]): Promise<ProposalMessageView> {
    const approvals = known ?? (await deps.store.listApprovals(proposal.id));
    const agentName = agent?.name ?? proposal.agentId;
    const resultContext = { agent: agentName, operation: proposal.operation, params: proposal.params };
    return {
      id: proposal.id,
      operation: proposal.operation,
      description: deps.describe(proposal.operation),
      summary: proposal.summary,
      agent: agentName,
      confirmationType: proposal.confirmationType,
      cost: proposal.cost,
      expiresAt: proposal.expiresAt,
      status: proposal.status,
      quorum: proposal.quorum,
      approvals: approvals.map((a) => ({ approver: a.approver, at: a.at })),
      decision: proposal.decidedBy && proposal.decidedAt ? { by: proposal.decidedBy, at: proposal.decidedAt, reason: proposal.decisionReason } : null,
      result: chatResultText(proposal.result, resultContext, deps.resultSettings?.(proposal.operation)),
      error: proposal.error === null ? null : chatSafeText(proposal.error),
      reminders: proposal.reminders,
      grantDurationsMs: deps.grantDurations?.(proposal.operation) ?? [],
      escalatedAt: proposal.escalatedAt,
      consoleUrl: deps.publicUrl ? new URL(`/console/proposals/${proposal.id}`, deps.publicUrl).toString() : null,
      trail: [],
    };
  }

  const versionOf = (view: ProposalMessageView) => sha256Hex(canonicalJson({ ...view, trail: [], expiresAt: view.expiresAt.toISOString() }));

  /**
   * Returns its last write unsent (`LastWrite`): the outbox sends it with the job's completion. A
   * caller outside the outbox sends it itself (`send()`).
   */
  async function sync(proposalId: string, platform: ChatPublisher['platform'], known?: ProposalSnapshot): Promise<LastWrite | undefined> {
    const publisher = deps.publishers.find((p) => p.platform === platform);
    if (!publisher) return;
    // Known: the first post of a proposal this process just inserted (src/outbox/README.md, "Taken as
    // queued"). Its message cannot exist yet, nor a trail be due, and the state is the one its change
    // committed: the read would find exactly this.
    const found = known ? { ...known, message: null, trail: null } : await deps.messages.getForSync(proposalId, platform);
    if (!found) return;
    const { proposal } = found;
    const channel = deps.channelFor(proposal.operation, platform);
    if (!channel) return;
    const view = await buildView(proposal, found.agent, found.approvals);
    const version = versionOf(view);
    let message = found.message;
    // Read with the proposal: due once it is final, until a trail is recorded as posted.
    const trailDue = found.trail && publisher.postTrail ? found.trail : null;
    if (!message) {
      const ref = await publisher.post(channel, view);
      message = {
        proposalId: proposal.id,
        platform,
        channel: ref.channel,
        messageId: ref.messageId,
        renderedVersion: version,
        trailPosted: null,
        createdAt: deps.clock(),
      };
      const posted = deps.messages.posted(message);
      // Nothing follows a post but a trail (a new message shows the current version). With one to
      // post, the message is recorded first: a trail that fails must not make the retry post it again.
      if (!trailDue) return posted;
      await posted.send();
    }
    const edited = message.renderedVersion !== version;
    if (edited) await publisher.update({ channel: message.channel, messageId: message.messageId }, view);
    if (trailDue && publisher.postTrail) {
      await publisher.postTrail({ channel: message.channel, messageId: message.messageId }, { ...view, trail: trailDue.map(auditLine) });
      // The edit's version is recorded with the trail, one write for both: should the trail fail,
      // the retry edits the message again, which shows the same thing.
      return deps.messages.trailPosted(proposal.id, platform, deps.clock(), edited ? version : undefined);
    }
    return edited ? deps.messages.rendered(proposal.id, platform, version) : undefined;
  }

  /** Posts a reminder or an escalation next to the proposal's message (an outbox job, after its sync). */
  async function followUp(payload: JobPayloads['chat.followup']): Promise<void> {
    const { platform } = payload;
    const publisher = deps.publishers.find((p) => p.platform === platform);
    const proposal = await deps.store.getProposal(payload.proposalId);
    if (!publisher?.postFollowUp || !proposal || proposal.status !== 'pending') return;
    const message = await deps.messages.get(proposal.id, platform);
    if (!message) return;
    const view = await buildView(proposal, await deps.store.getAgent(proposal.agentId));
    await publisher.postFollowUp({ channel: message.channel, messageId: message.messageId }, view, {
      kind: payload.kind,
      mention: payload.mention,
      channel: payload.channel,
    });
  }

  return { sync, buildView, followUp };
}

export type ChatSync = ReturnType<typeof createChatSync>;
