/** The records the core reasons about. Storage maps its rows to these; nothing here knows SQL. */
import { z } from 'zod';
import type { ApproverRule } from '../policy/approver-rule.js';
import type { ApprovalParts, EscalateParts } from './chat-platform.js';
import type { PolicyRule } from '../policy/rules.js';

/**
 * Every state a proposal can be in, the one list: the type below, the API's zod enum, the console's
 * filter, the CLI's `--status` and the table's check constraint are all built from it.
 */
export const PROPOSAL_STATUSES = ['pending', 'approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'] as const;
export type ProposalStatus = (typeof PROPOSAL_STATUSES)[number];

/** The states a proposal is still open in: it may yet be decided, executed or committed. */
export const UNFINISHED_STATUSES = ['pending', 'approved', 'executing'] as const satisfies readonly ProposalStatus[];
export type UnfinishedStatus = (typeof UNFINISHED_STATUSES)[number];

/** The states a proposal ends in; its agent's callback goes out on reaching one. */
export const FINAL_STATUSES = ['committed', 'rejected', 'expired', 'cancelled'] as const satisfies readonly ProposalStatus[];
export type FinalStatus = (typeof FINAL_STATUSES)[number];
export const finalStatuses: readonly ProposalStatus[] = FINAL_STATUSES;
export const isFinalStatus = (status: ProposalStatus): status is FinalStatus => finalStatuses.includes(status);

/**
 * Every status is either unfinished or final, never both: a status added to `PROPOSAL_STATUSES` and to
 * neither list (or to both) makes this line fail to compile, so no SQL built from the lists misses it.
 */
type StatusesOutsideBothLists = Exclude<ProposalStatus, UnfinishedStatus | FinalStatus>;
type StatusesInBothLists = Extract<UnfinishedStatus, FinalStatus>;
export const STATUS_LISTS_PARTITION: [StatusesOutsideBothLists, StatusesInBothLists] extends [never, never] ? true : never = true;

const OPERATION_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * An operation's plain fields: those the operations file states and every part of the product reads as
 * they are, with no compiling or converting between. A new one goes here and only here: the config file
 * parses it with this schema (src/config/config-schema.ts spreads the shape), the config builder copies
 * it through (`operationFieldsOf`), and `OperationSpec` below gets its type, so every transport sees it.
 * Messages are the config file's: these schemas are what its errors are made from.
 */
export const operationFieldsSchema = z.object({
  name: z.string().regex(OPERATION_NAME, { error: 'expected lower_snake_case starting with a letter, at most 64 characters' }),
  description: z.string(),
  confirmationType: z.enum(['payment', 'approval', 'verification']).default('approval'),
  commit: z.enum(['on_approve', 'agent']).default('on_approve'),
  /** `passkey`: a person approves only with a WebAuthn assertion made for the proposal (src/core/step-up.ts). */
  stepUp: z.literal('passkey', { error: 'expected "passkey" (the one step-up there is)' }).optional(),
});
export type OperationFields = z.output<typeof operationFieldsSchema>;

/** The plain fields of a parsed operation and nothing else, unset optional ones left out: what a builder spreads. */
export function operationFieldsOf(source: OperationFields): OperationFields {
  const values = source as unknown as Record<string, unknown>;
  const fields: Record<string, unknown> = {};
  for (const key of Object.keys(operationFieldsSchema.shape)) if (values[key] !== undefined) fields[key] = values[key];
  return fields as OperationFields;
}

export type ConfirmationType = OperationFields['confirmationType'];
export type CommitMode = OperationFields['commit'];

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
  /** Who may decide this proposal when not the operation's list: a `require` rule's, or widened by escalation. */
  approvers: string[] | null;
  /** How many reminders went out while it waited. */
  reminders: number;
  escalatedAt: Date | null;
  /** `passkey` when the policy rule that required approval also required a passkey (src/core/step-up.ts). */
  stepUp?: 'passkey' | null;
  /**
   * The trace context of the propose span (`traceparent`, `tracestate`), so the decision, execution
   * and callbacks join the agent's trace wherever and whenever they happen; null when nothing traced it.
   */
  traceContext?: Record<string, string> | null;
}

/** A change of some of a stored proposal's columns: any but its id. */
export type ProposalPatch = Partial<Omit<ProposalRecord, 'id'>>;

export interface ApprovalRecord {
  proposalId: string;
  approver: string;
  matchedRule: string;
  via: string;
  at: Date;
  /** The verified passkey assertion of a step-up approval (src/core/step-up.ts); absent otherwise. */
  stepUp?: PasskeyProof | null;
}

export interface AuditEventInput {
  type: string;
  actor: string;
  proposalId?: string | null;
  agentId?: string | null;
  data?: Record<string, unknown>;
}

export interface AuditEventRecord {
  /** Insert order; says nothing about commit order. */
  id: number;
  /** The row's place in the chain: null until the integrator places it (within a second). */
  seq: number | null;
  at: Date;
  type: string;
  actor: string;
  proposalId: string | null;
  agentId: string | null;
  data: Record<string, unknown>;
  prevHash: string | null;
  hash: string | null;
}

/** A row the integrator has placed in the chain. */
export type ChainedAuditEvent = AuditEventRecord & { seq: number; prevHash: string; hash: string };

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

/** An operation as the core runs it: its plain fields (above) and what the config compiled for it. */
export interface OperationSpec extends OperationFields {
  paramsSchema: Record<string, unknown>;
  validateParams(params: unknown): ParamError[];
  renderSummary(context: SummaryContext): string;
  renderCost?(context: SummaryContext): string;
  expiresInMs: number;
  approval: {
    approvers: string[];
    quorum: number;
    remindMs?: number[];
    /** Also where the escalation is posted, per chat platform (`escalate.<name>`). */
    escalate?: { afterMs: number; approvers: string[] } & EscalateParts;
    /** Who among the approvers may approve this proposal: checked at every click, after the approvers list. */
    approverRule?: ApproverRule;
    // And where the proposal's message is posted, per chat platform (`approval.<name>`); none: not on that platform.
  } & ApprovalParts;
  policy?: PolicyRule[];
  grants?: { allow: boolean; maxDurationMs: number; durationsMs: number[] } | null;
  automaticDecisions?: 'message' | 'silent';
  /** A standing rule of the operation (an MCP upstream's read-only tool): approved at propose by this decider. */
  autoApprove?: { decider: string; reason: string };
}

/** What a chat transport reads of an operation: who approves it, and which standing approvals it offers. */
export type OperationApprovalView = Pick<OperationSpec, 'name'> & {
  approval: Pick<OperationSpec['approval'], 'approvers' | 'approverRule'>;
  grants?: Pick<NonNullable<OperationSpec['grants']>, 'allow' | 'durationsMs'> | null;
};

/** Deciders that are not people: a policy rule or a grant decided at propose time. */
export const isAutomaticDecider = (decidedBy: string | null): boolean => decidedBy !== null && /^(policy|grant):/.test(decidedBy);

/** The approvers who may decide this proposal: its own list when a rule or an escalation set one. */
export function approversOf(proposal: Pick<ProposalRecord, 'approvers'>, operation: { approval: { approvers: readonly string[] } }): string[] {
  return proposal.approvers ?? [...operation.approval.approvers];
}

/**
 * Every approver identity an operation's configuration can put before a click: its approvers, its
 * escalation's, those its policy rules require, and the groups its approver rule asks about. A
 * proposal's own approvers list comes from these (a policy rule's or an escalation's), unless it was
 * made under an earlier configuration.
 */
export function configuredApproverIdentities(operation: Pick<OperationSpec, 'approval' | 'policy'>): string[] {
  const { approvers, escalate, approverRule } = operation.approval;
  const required = (operation.policy ?? []).flatMap((rule) => rule.approvers ?? []);
  return [...new Set([...approvers, ...(escalate?.approvers ?? []), ...required, ...(approverRule?.mentionedGroups ?? [])])];
}

/** The operation as this proposal sees it (its own approvers list), for the decider rules. */
export function operationFor<T extends { approval: { approvers: readonly string[] } }>(proposal: Pick<ProposalRecord, 'approvers'>, operation: T): T {
  return proposal.approvers ? { ...operation, approval: { ...operation.approval, approvers: proposal.approvers } } : operation;
}

/** A human (or operator acting as one) deciding on a proposal. */
export interface Decider {
  /** `slack:U…`, `discord:user:…`, `web:NAME`. */
  identity: string;
  /** Groups or roles the transport resolved for this person (`slack:group:S…`, `discord:role:…`, `oidc:group:…`). */
  memberOf?: string[];
  /** The issuer's own group names (its groups claim), for approver rules: `"finance-leads" in approver.groups`. */
  groups?: string[];
  /** How the decision arrived: `slack`, `discord`, `web`, `cli`. */
  via: string;
  /** A verified passkey assertion for this proposal: what a `stepUp: passkey` operation's approval needs. */
  stepUp?: PasskeyProof;
}

export type Clock = () => Date;

/** What a verified assertion leaves behind: enough to verify the signature again with the stored public key. */
export interface PasskeyProof {
  kind: 'passkey';
  /** base64url credential id, as the authenticator reported it. */
  credentialId: string;
  /** The single-use server nonce the challenge was derived from (base64url). */
  nonce: string;
  /** The proposal's binding hash the challenge covers (hex). */
  bindingHash: string;
  /** base64url, exactly as signed: the signature covers authenticatorData || sha256(clientDataJSON). */
  authenticatorData: string;
  clientDataJSON: string;
  signature: string;
  /** hex SHA-256 of each, for a reader of the audit log who does not decode base64url. */
  authenticatorDataHash: string;
  clientDataHash: string;
  counter: number;
}
