/** The records the core reasons about. Storage maps its rows to these; nothing here knows SQL. */

export type ProposalStatus =
  | 'pending'
  | 'approved'
  | 'executing'
  | 'committed'
  | 'rejected'
  | 'expired'
  | 'cancelled';

export const finalStatuses: readonly ProposalStatus[] = ['committed', 'rejected', 'expired', 'cancelled'];

export type ConfirmationType = 'payment' | 'approval' | 'verification';
export type CommitMode = 'on_approve' | 'agent';

export interface AgentRecord {
  id: string;
  name: string;
  keyHash: string;
  keyPrefix: string;
  callbackSecret: string;
  owners: string[];
  operations: string[] | null;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface ProposalRecord {
  id: string;
  agentId: string;
  operation: string;
  params: Record<string, unknown>;
  paramsHash: string;
  summary: string;
  summaryHash: string;
  cost: string | null;
  confirmationType: ConfirmationType;
  tokenHash: string;
  status: ProposalStatus;
  quorum: number;
  commitMode: CommitMode;
  callbackUrl: string | null;
  createdAt: Date;
  expiresAt: Date;
  consumedAt: Date | null;
  decidedBy: string | null;
  decidedAt: Date | null;
  decisionReason: string | null;
  result: unknown;
  error: string | null;
  executionAttempts: number;
  leaseUntil: Date | null;
  updatedAt: Date;
}

export interface ApprovalRecord {
  proposalId: string;
  approver: string;
  matchedRule: string;
  via: string;
  at: Date;
}

export interface AuditEventInput {
  type: string;
  actor: string;
  proposalId?: string | null;
  agentId?: string | null;
  data?: Record<string, unknown>;
}

export interface AuditEventRecord {
  seq: number;
  at: Date;
  type: string;
  actor: string;
  proposalId: string | null;
  agentId: string | null;
  data: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

/** What an operation of the config file looks like to the core (src/config builds these). */
export interface ParamError {
  path: string;
  message: string;
}

export interface SummaryContext {
  agent: string;
  operation: string;
  params: Record<string, unknown>;
}

export interface OperationSpec {
  name: string;
  description: string;
  confirmationType: ConfirmationType;
  paramsSchema: Record<string, unknown>;
  validateParams(params: unknown): ParamError[];
  renderSummary(context: SummaryContext): string;
  renderCost?(context: SummaryContext): string;
  expiresInMs: number;
  approval: { approvers: string[]; quorum: number };
  commit: CommitMode;
}

/** A human (or operator acting as one) deciding on a proposal. */
export interface Decider {
  /** `slack:U…`, `discord:user:…`, `web:NAME`. */
  identity: string;
  /** Groups or roles the transport resolved for this person (`slack:group:S…`, `discord:role:…`). */
  memberOf?: string[];
  /** How the decision arrived: `slack`, `discord`, `web`, `cli`. */
  via: string;
}

export type Clock = () => Date;
