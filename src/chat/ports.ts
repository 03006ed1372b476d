import type { LastWrite } from '../core/jobs.js';
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

/** One event of the audit trail a final proposal's message gets (on platforms that post one). */
export interface TrailEvent {
  at: Date;
  type: string;
  actor: string;
  data: Record<string, unknown>;
}

/** The most audit events a message's trail shows, oldest first. */
export const TRAIL_EVENT_LIMIT = 200;

/** What a chat sync renders and where. */
export interface SyncState {
  proposal: ProposalRecord;
  agent: AgentRecord | null;
  approvals: readonly ApprovalRecord[];
  message: ChatMessageRow | null;
  /**
   * The proposal's audit trail (up to TRAIL_EVENT_LIMIT events, oldest first) when its message is
   * due one: the proposal is final and no trail was posted yet. Otherwise null.
   */
  trail: TrailEvent[] | null;
}

/** The chat message of each proposal on each platform. */
export interface ChatMessageStore {
  /** What a chat sync renders and where, with the audit trail when one is due: one read. */
  getForSync(proposalId: string, platform: string): Promise<SyncState | null>;
  get(proposalId: string, platform: string): Promise<ChatMessageRow | null>;
  // The writes of a sync, not sent yet: its last goes with the job's completion (`LastWrite`).
  /** Records the message just posted; a second record of it lets the first stand. */
  posted(row: Omit<ChatMessageRow, 'trailPosted'>): LastWrite;
  /** Records the version the message was just edited to. */
  rendered(proposalId: string, platform: string, renderedVersion: string): LastWrite;
  /** Records the audit trail posted at `at`, and with it the version the message was just edited to, if it was. */
  trailPosted(proposalId: string, platform: string, at: Date, renderedVersion?: string): LastWrite;
}

/** One piece of work that must run on one replica of the fleet at a time (Discord's gateway connection). */
export interface ElectedWork {
  /** The advisory lock key; every replica uses the same one for the same work. */
  key: number;
  name: string;
  log: () => { info(details: object, message?: string): void; warn(details: object, message?: string): void };
  /** How often a standby tries to take over, and the leader checks it still leads. */
  retryMs?: number;
  onElected?(): Promise<void> | void;
  onDeposed?(): Promise<void> | void;
}

/**
 * Elects one replica for `work` (src/db/leader-election.ts: a PostgreSQL advisory lock; on the
 * embedded database this process always leads). The runtime hands it in.
 */
export type LeaderElector = (work: ElectedWork) => { start(): void; stop(): Promise<void> };
