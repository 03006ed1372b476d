import type { Clock, OperationSpec } from '../core/model.js';
import type { People } from '../core/people.js';
import type { Store } from '../core/ports.js';
import type { ProposalService } from '../core/proposals.js';

/**
 * One decision link: for one approver of one proposal, bound to the proposal's binding hash (its
 * agent, operation, params and summary), dead once used or once the proposal expires. Only the
 * token's SHA-256 is stored.
 */
export interface EmailLinkRow {
  tokenHash: string;
  proposalId: string;
  approver: string;
  bindingHash: string;
  expiresAt: Date;
  usedAt: Date | null;
  createdAt: Date;
}

/**
 * The mail a proposal sent one recipient: its Message-ID (the "message ref" the outcome replies to,
 * so it lands in the same thread) and subject, when it left, and when the outcome followed it.
 */
export interface EmailMessageRow {
  proposalId: string;
  recipient: string;
  messageId: string;
  subject: string;
  sentAt: Date | null;
  outcomeSentAt: Date | null;
  createdAt: Date;
}

/** The storage email needs, implemented by `src/db/email-store.ts`. */
export interface EmailStore {
  listMessages(proposalId: string): Promise<EmailMessageRow[]>;
  /** Records a mail about to be sent; a row already there (an earlier attempt) is kept. */
  insertMessage(row: Omit<EmailMessageRow, 'sentAt' | 'outcomeSentAt'>): Promise<void>;
  markSent(proposalId: string, recipient: string, at: Date): Promise<void>;
  markOutcomeSent(proposalId: string, recipient: string, at: Date): Promise<void>;
  insertLink(row: Omit<EmailLinkRow, 'usedAt'>): Promise<void>;
  findLink(tokenHash: string): Promise<EmailLinkRow | null>;
  /** Marks the link used if it is unused and unexpired at `now`, in one statement: two clicks cannot both have it. */
  claimLink(tokenHash: string, now: Date): Promise<EmailLinkRow | null>;
  /** Gives a claimed link back when the decision could not be made for a reason that may pass (the database was away). */
  releaseLink(tokenHash: string): Promise<void>;
}

/** The slice of twokey a decision link needs; the runtime hands in exactly this. */
export interface EmailServices {
  proposals: Pick<ProposalService, 'approve' | 'reject' | 'preview'>;
  store: Pick<Store, 'getProposal' | 'getAgent' | 'listApprovals'>;
  operation(name: string): Pick<OperationSpec, 'name' | 'description' | 'stepUp' | 'approval'> | undefined;
  clock: Clock;
  people?: People;
  /** Where links and sent mails are kept (the runtime builds it on the database). */
  emailStore: EmailStore;
}
