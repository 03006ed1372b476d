import { and, eq, sql } from 'drizzle-orm';
import type { AgentRecord, ApprovalRecord, ProposalRecord } from '../core/model.js';
import type { ChatMessageRow, ChatMessageStore } from '../chat/ports.js';
import type { Db } from './database.js';
import { agents, chatMessages, proposals } from './schema.js';
import { approvalsColumn, toAgent, toApprovals, toProposal } from './store.js';

// The table's row is chat's `ChatMessageRow`; this fails to compile when the two drift apart.
type ChatMessagesTableRow = typeof chatMessages.$inferSelect;
const sameRow: [ChatMessagesTableRow, ChatMessageRow] extends [ChatMessageRow, ChatMessagesTableRow] ? true : never = true;
void sameRow;

/** Data access for the chat message of each proposal on each platform. */
export function createChatMessageStore(db: Db): ChatMessageStore {
  const where = (proposalId: string, platform: string) => and(eq(chatMessages.proposalId, proposalId), eq(chatMessages.platform, platform));
  // Every chat post and edit starts with this read: built once, only its parameters change.
  const forSync = db
    .select({ proposal: proposals, agent: agents, approvals: approvalsColumn, message: chatMessages })
    .from(proposals)
    .leftJoin(agents, eq(agents.id, proposals.agentId))
    .leftJoin(chatMessages, and(eq(chatMessages.proposalId, proposals.id), eq(chatMessages.platform, sql.placeholder('platform'))))
    .where(eq(proposals.id, sql.placeholder('proposalId')))
    .prepare('twokey_chat_sync_read');
  const setRendered = db
    .update(chatMessages)
    .set({ renderedVersion: sql`${sql.placeholder('renderedVersion')}` })
    .where(and(eq(chatMessages.proposalId, sql.placeholder('proposalId')), eq(chatMessages.platform, sql.placeholder('platform'))))
    .prepare('twokey_chat_set_rendered');
  // The trail, and the version of the edit made just before it when there was one (null: none).
  const setTrailPosted = db
    .update(chatMessages)
    .set({
      trailPosted: sql`${sql.placeholder('at')}::timestamptz`,
      renderedVersion: sql`coalesce(${sql.placeholder('renderedVersion')}::text, ${chatMessages.renderedVersion})`,
    })
    .where(and(eq(chatMessages.proposalId, sql.placeholder('proposalId')), eq(chatMessages.platform, sql.placeholder('platform'))))
    .prepare('twokey_chat_set_trail_posted');
  return {
    /** What a chat sync renders and where, in one statement: the proposal, its agent, approvals and message. */
    async getForSync(
      proposalId: string,
      platform: string,
    ): Promise<{ proposal: ProposalRecord; agent: AgentRecord | null; approvals: ApprovalRecord[]; message: ChatMessageRow | null } | null> {
      const [row] = await forSync.execute({ proposalId, platform });
      if (!row) return null;
      return {
        proposal: toProposal(row.proposal),
        agent: row.agent ? toAgent(row.agent) : null,
        approvals: toApprovals(proposalId, row.approvals),
        message: row.message,
      };
    },
    async get(proposalId: string, platform: string): Promise<ChatMessageRow | null> {
      const [row] = await db.select().from(chatMessages).where(where(proposalId, platform));
      return row ?? null;
    },
    async insert(row: Omit<ChatMessageRow, 'trailPosted'>): Promise<void> {
      await db
        .insert(chatMessages)
        .values({ ...row, trailPosted: null })
        .onConflictDoNothing();
    },
    async setRendered(proposalId: string, platform: string, renderedVersion: string): Promise<void> {
      await setRendered.execute({ proposalId, platform, renderedVersion });
    },
    async setTrailPosted(proposalId: string, platform: string, at: Date, renderedVersion?: string): Promise<void> {
      await setTrailPosted.execute({ proposalId, platform, at: at.toISOString(), renderedVersion: renderedVersion ?? null });
    },
  };
}
