import { durationLabel } from '../lib/duration.js';

/**
 * Every word of an approval request, once, for every channel (Slack, Discord, the web console, and
 * whatever joins them). A converter adds markup and escaping, never words: changing a word here
 * changes it everywhere, and a test can render with a changed table to prove it.
 */

/** Where a proposal stands, as a reader sees it: its status, with a failed execution told apart. */
export type CardTone = 'pending' | 'approved' | 'executing' | 'committed' | 'rejected' | 'expired' | 'cancelled' | 'failed';

/**
 * Each tone's symbol in plain Unicode, shown beside the state's name so a state never depends on a
 * colour the reader (or a mail client) may drop. Channels with richer symbols of their own (Slack's
 * and Teams' emoji) map tones themselves.
 */
export const TONE_SYMBOLS: Readonly<Record<CardTone, string>> = {
  pending: '◷',
  approved: '✓',
  executing: '↻',
  committed: '✔',
  rejected: '✕',
  expired: '◌',
  cancelled: '⊘',
  failed: '!',
};

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

export const CARD_WORDS = {
  /** The name of each state: a badge, a header, the first word of the status line. */
  states: {
    pending: 'Pending',
    approved: 'Approved',
    executing: 'Executing',
    committed: 'Committed',
    rejected: 'Rejected',
    expired: 'Expired',
    cancelled: 'Cancelled',
    failed: 'Execution failed',
  } satisfies Record<CardTone, string>,
  fields: {
    status: 'Status',
    agent: 'Agent',
    operation: 'Operation',
    confirmationType: 'Confirmation type',
    cost: 'Cost',
    /** The expiry while it can still come, once it came, and after another ending. */
    expires: 'Expires',
    expired: 'Expired',
    expiry: 'Expiry',
    approvals: 'Approvals',
    proposal: 'Proposal',
  },
  /** "n of m" approvals: a field's value, and inside the status line. */
  approvalsCount: (count: number, quorum: number): string => `${count} of ${quorum}`,
  status: {
    waiting: (missing: number, count: string): string => `waiting for ${missing} more approval${missing === 1 ? '' : 's'} (${count})`,
    reminded: (times: number): string => `reminded ${times}×`,
    escalated: 'escalated',
    decidedBy: 'by',
    /** When no decider was recorded (older rows): never an empty name. */
    someone: 'someone',
    awaitingExecution: 'waiting for execution',
    executingApprovedBy: 'approved by',
    noReason: 'no reason given',
    expired: (count: string): string => `nobody approved it in time (${count}); nothing was run`,
    cancelled: 'by the agent; nothing was run',
    retryHint: ['The approval stands and the confirmation token is unused: ', 'Retry', ' runs the operation again.'] as const,
  },
  /** A decision no human made: a policy rule, or a grant (a standing approval). */
  automatic: {
    approved: 'auto-approved',
    denied: 'auto-denied',
    byRule: 'by rule',
    byGrant: 'by grant',
    forAgent: 'for',
  },
  actions: {
    approve: 'Approve',
    reject: 'Reject',
    retry: 'Retry',
    grant: (firstDurationMs: number): string => `Approve for ${durationLabel(firstDurationMs)}…`,
    open: (proposalId: string): string => `Open proposal ${proposalId} in the twokey console`,
    /** A payment gets a second look before it leaves the channel, where the channel can ask. */
    confirmApprovePayment: 'Approve this payment?',
    confirmRetryPayment: 'Retry this payment?',
    cancel: 'Cancel',
  },
  followUp: {
    reminder: 'Reminder',
    escalated: 'Escalated to',
    escalatedWho: ', who may now decide',
    nobodyNamed: 'the approvers',
    waits: (missing: number): string => ` still waits for ${plural(missing, 'approval')}; it expires `,
    doesNotRun: ' and then does not run.',
    by: 'by',
    open: 'Open it',
  },
};

export type CardWords = typeof CARD_WORDS;
