import { and, eq, sql } from 'drizzle-orm';
import { FINAL_STATUSES } from '../core/model.js';
import { TRAIL_EVENT_LIMIT, type ChatMessageRow, type ChatMessageStore, type SyncState, type TrailEvent } from '../chat/ports.js';
import type { Db } from './database.js';
import { preparedLastWrite } from './jobs-store.js';
import { agents, auditEvents, chatMessages, proposals } from './schema.js';
import { approvalsColumn, toAgent, toApprovals, toProposal } from './store.js';

// The table's row is chat's `ChatMessageRow`; this fails to compile when the two drift apart.
type ChatMessagesTableRow = typeof chatMessages.$inferSelect;
const sameRow: [ChatMessagesTableRow, ChatMessageRow] extends [ChatMessageRow, ChatMessagesTableRow] ? true : never = true;
void sameRow;

type TrailJson = Omit<TrailEvent, 'at'> & { at: string };

/**
 * The audit trail of a final proposal whose message has none yet (no message yet counts), read in
 * the sync's own statement; null otherwise. CASE evaluates its subquery only when it holds, so the
 * syncs of a proposal still waiting pay nothing for it.
 */
const trailColumn = sql<TrailJson[] | string | null>`case
  when ${proposals.status} in (${sql.join(
    FINAL_STATUSES.map((status) => sql`${status}`),
    sql`, `,
  )}) and ${chatMessages.trailPosted} is null
  then coalesce((
    select json_agg(json_build_object('at', e.at, 'type', e.type, 'actor', e.actor, 'data', e.data) order by e.id)
    from (select id, at, type, actor, data from ${auditEvents} where ${auditEvents.proposalId} = ${proposals.id}
          order by id limit ${sql.raw(String(TRAIL_EVENT_LIMIT))}) e), '[]'::json)
  end`;

/** PGlite hands json back parsed, postgres.js as text when drizzle asks for raw values. */
function toTrail(value: TrailJson[] | string | null): TrailEvent[] | null {
  if (value === null) return null;
  const events = typeof value === 'string' ? (JSON.parse(value) as TrailJson[]) : value;
  return events.map((event) => ({ ...event, at: new Date(event.at) }));
}

/** Data access for the chat message of each proposal on each platform. */
export function createChatMessageStore(db: Db): ChatMessageStore {
  const where = (proposalId: string, platform: string) => and(eq(chatMessages.proposalId, proposalId), eq(chatMessages.platform, platform));
  // Every chat post and edit starts with this read: built once, only its parameters change.
  const forSync = db
    .select({ proposal: proposals, agent: agents, approvals: approvalsColumn, message: chatMessages, trail: trailColumn })
    .from(proposals)
    .leftJoin(agents, eq(agents.id, proposals.agentId))
    .leftJoin(chatMessages, and(eq(chatMessages.proposalId, proposals.id), eq(chatMessages.platform, sql.placeholder('platform'))))
    .where(eq(proposals.id, sql.placeholder('proposalId')))
    .prepare('twokey_chat_sync_read');
  // A sync's last write, each sent with its job's completion (or alone): built once.
  const ofThisMessage = and(eq(chatMessages.proposalId, sql.placeholder('proposalId')), eq(chatMessages.platform, sql.placeholder('platform')));
  const one = { one: sql<number>`1` };
  // A second record of the same post (a retry) lets the first stand.
  const posted = preparedLastWrite(
    db,
    'twokey_chat_posted',
    db
      .insert(chatMessages)
      .values({
        proposalId: sql`${sql.placeholder('proposalId')}`,
        platform: sql`${sql.placeholder('platform')}`,
        channel: sql`${sql.placeholder('channel')}`,
        messageId: sql`${sql.placeholder('messageId')}`,
        renderedVersion: sql`${sql.placeholder('renderedVersion')}`,
        trailPosted: null,
        createdAt: sql`${sql.placeholder('createdAt')}::timestamptz`,
      })
      .onConflictDoNothing()
      .returning(one),
  );
  const rendered = preparedLastWrite(
    db,
    'twokey_chat_rendered',
    db
      .update(chatMessages)
      .set({ renderedVersion: sql`${sql.placeholder('renderedVersion')}` })
      .where(ofThisMessage)
      .returning(one),
  );
  // The trail, and the version of the edit made just before it when there was one (null: none).
  const trailPosted = preparedLastWrite(
    db,
    'twokey_chat_trail_posted',
    db
      .update(chatMessages)
      .set({
        trailPosted: sql`${sql.placeholder('at')}::timestamptz`,
        renderedVersion: sql`coalesce(${sql.placeholder('renderedVersion')}::text, ${chatMessages.renderedVersion})`,
      })
      .where(ofThisMessage)
      .returning(one),
  );
  return {
    /** What a chat sync renders and where, in one statement: the proposal, its agent, approvals and message, and the trail when due. */
    async getForSync(proposalId: string, platform: string): Promise<SyncState | null> {
      const [row] = await forSync.execute({ proposalId, platform });
      if (!row) return null;
      return {
        proposal: toProposal(row.proposal),
        agent: row.agent ? toAgent(row.agent) : null,
        approvals: toApprovals(proposalId, row.approvals),
        message: row.message,
        trail: toTrail(row.trail),
      };
    },
    async get(proposalId: string, platform: string): Promise<ChatMessageRow | null> {
      const [row] = await db.select().from(chatMessages).where(where(proposalId, platform));
      return row ?? null;
    },
    posted: (row) => posted({ ...row, createdAt: row.createdAt.toISOString() }),
    rendered: (proposalId, platform, renderedVersion) => rendered({ proposalId, platform, renderedVersion }),
    trailPosted: (proposalId, platform, at, renderedVersion) =>
      trailPosted({ proposalId, platform, at: at.toISOString(), renderedVersion: renderedVersion ?? null }),
  };
}
