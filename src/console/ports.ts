import type { AgentService } from '../core/agents.js';
import type { AuditService } from '../core/audit.js';
import type { ChangeFeed } from '../core/changes.js';
import type { GrantService } from '../core/grant-service.js';
import type { ApprovalRecord, AuditEventInput, Clock, OperationSpec, ProposalRecord, ProposalStatus } from '../core/model.js';
import type { People } from '../core/people.js';
import type { Store } from '../core/ports.js';
import type { ProposalService } from '../core/proposals.js';
import type { PasskeyService } from '../passkeys/service.js';

/**
 * What the console needs from the rest of twokey, and nothing more: the core's services it calls
 * as a transport, and the console's own storage (implemented in src/db).
 */
export interface ConsoleServices {
  clock: Clock;
  store: Pick<Store, 'getProposal' | 'listProposals'>;
  operations(): OperationSpec[];
  operation(name: string): OperationSpec | undefined;
  people: People;
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'retry'>;
  grants: Pick<GrantService, 'approveAndGrant' | 'revoke' | 'mayRevoke' | 'list' | 'get'>;
  agents: Pick<AgentService, 'list' | 'revokeAsPerson' | 'revokeRightOf'>;
  changes: Pick<ChangeFeed, 'onEvery'>;
  audit: Pick<AuditService, 'list' | 'verifyRecent'>;
  passkeys: PasskeyService;
}

export interface HistoryFilter {
  status?: ProposalStatus;
  operation?: string;
  agentId?: string;
  /** Proposals this person approved or decided. */
  approver?: string;
  /** Created at or after. */
  from?: Date;
  /** Created before. */
  to?: Date;
  limit: number;
}

/** Read-only queries the pages need beyond the core's store: history filters, batch reads. */
export interface ConsoleQueries {
  history(filter: HistoryFilter): Promise<ProposalRecord[]>;
  /** Approvals of many proposals in one query (a list page shows "n of m" on every row). */
  approvalsOf(ids: readonly string[]): Promise<Map<string, ApprovalRecord[]>>;
  /** The latest audit event that names each agent: its last proposal, decision, or key change. */
  lastActivityByAgent(): Promise<Map<string, Date>>;
  /** Proposals per agent and status, for the agents page. */
  proposalCountsByAgent(): Promise<Map<string, { total: number; pending: number }>>;
}

/** A one-time sign-in link; only the SHA-256 of its token is stored. */
export interface ApproverLinkRecord {
  tokenHash: string;
  approver: string;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

/** A console session; only the SHA-256 of the cookie's secret is stored. */
export interface ConsoleSessionRecord {
  idHash: string;
  approver: string;
  /** The issuer's groups at sign-in; null for a session a one-time link opened. */
  groups: string[] | null;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

/** The writes of one sign-in step, all inside one transaction together with their audit event. */
export interface SessionTransaction {
  insertLink(row: Omit<ApproverLinkRecord, 'usedAt'>): Promise<void>;
  /** Marks an unused, unexpired link used; null when it was not (the caller finds out why). */
  useLink(tokenHash: string, now: Date): Promise<ApproverLinkRecord | null>;
  insertSession(row: Omit<ConsoleSessionRecord, 'revokedAt'>): Promise<void>;
  revokeSession(idHash: string, now: Date): Promise<boolean>;
  /** Revokes every live session of this approver; returns how many. */
  revokeSessionsOf(approver: string, now: Date): Promise<number>;
  /** Ends the unused links of this approver (they expire now); returns how many. */
  expireLinksOf(approver: string, now: Date): Promise<number>;
  appendAudit(event: AuditEventInput, at: Date): Promise<void>;
}

/** The console's own storage, which the runtime hands in (src/db implements both). */
export interface ConsoleStores {
  sessions: ConsoleSessionStore;
  queries: ConsoleQueries;
}

/** Sign-in links and sessions (tables approver_links, console_sessions). */
export interface ConsoleSessionStore {
  transaction<T>(work: (tx: SessionTransaction) => Promise<T>): Promise<T>;
  getLink(tokenHash: string): Promise<ApproverLinkRecord | null>;
  getSession(idHash: string): Promise<ConsoleSessionRecord | null>;
}
