import type { AgentRecord, ApprovalRecord, ProposalRecord } from '../core/model.js';

/**
 * The storage a chat sync needs, declared here and implemented by `src/db/chat-store.ts`; the
 * runtime hands it in.
 */

/** The chat message of one proposal on one platform. */
export interface ChatMessageRow {
  proposalId: string;
  platform: string;
  channel: string;
  messageId: string;
  /** The last proposal state rendered into the message; a sync with nothing new writes nothing. */
  renderedVersion: string | null;
  trailPosted: Date | null;
  createdAt: Date;
}

/** The chat message of each proposal on each platform. */
export interface ChatMessageStore {
  /** What a chat sync renders and where: the proposal, its agent, approvals and message. */
  getForSync(
    proposalId: string,
    platform: string,
  ): Promise<{ proposal: ProposalRecord; agent: AgentRecord | null; approvals: ApprovalRecord[]; message: ChatMessageRow | null } | null>;
  get(proposalId: string, platform: string): Promise<ChatMessageRow | null>;
  insert(row: Omit<ChatMessageRow, 'trailPosted'>): Promise<void>;
  setRendered(proposalId: string, platform: string, renderedVersion: string): Promise<void>;
  setTrailPosted(proposalId: string, platform: string, at: Date): Promise<void>;
}
