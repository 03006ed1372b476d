import type {
  AgentRecord,
  ApprovalRecord,
  AuditEventInput,
  AuditEventRecord,
  ProposalRecord,
  ProposalStatus,
} from './model.js';

/** Work done inside one database transaction. Every state change and its audit row go through one. */
export interface StoreTransaction {
  /** Reads the proposal and holds its row lock until the transaction ends. */
  lockProposal(id: string): Promise<ProposalRecord | null>;
  insertProposal(proposal: ProposalRecord): Promise<void>;
  updateProposal(id: string, patch: Partial<Omit<ProposalRecord, 'id'>>): Promise<void>;
  /** false when this approver was already counted for this proposal. */
  insertApproval(approval: ApprovalRecord): Promise<boolean>;
  listApprovals(proposalId: string): Promise<ApprovalRecord[]>;
  getAgent(id: string): Promise<AgentRecord | null>;
  insertAgent(agent: AgentRecord): Promise<void>;
  revokeAgent(id: string, at: Date): Promise<void>;
  appendAudit(event: AuditEventInput, at: Date): Promise<void>;
}

export interface ProposalFilter {
  status?: ProposalStatus;
  agentId?: string;
  operation?: string;
  limit?: number;
}

export interface AuditQuery {
  afterSeq?: number;
  proposalId?: string;
  limit?: number;
}

export interface Store {
  transaction<T>(work: (tx: StoreTransaction) => Promise<T>): Promise<T>;
  getProposal(id: string): Promise<ProposalRecord | null>;
  listProposals(filter: ProposalFilter): Promise<ProposalRecord[]>;
  listApprovals(proposalId: string): Promise<ApprovalRecord[]>;
  /** Pending proposals whose expiry has passed, oldest first. */
  listExpiredPending(now: Date, limit: number): Promise<ProposalRecord[]>;
  getAgent(id: string): Promise<AgentRecord | null>;
  findAgentByName(name: string): Promise<AgentRecord | null>;
  findAgentByKeyHash(keyHash: string): Promise<AgentRecord | null>;
  listAgents(): Promise<AgentRecord[]>;
  listAudit(query: AuditQuery): Promise<AuditEventRecord[]>;
  ping(): Promise<void>;
}
