import type { FastifyInstance } from 'fastify';
import type { ConfirmationType, ProposalStatus } from '../core/model.js';
import type { ChatPlatformName, JobHandlers } from '../core/jobs.js';

/** Everything a chat message about one proposal shows. Never holds the token. */
export interface ProposalMessageView {
  id: string;
  operation: string;
  description: string;
  summary: string;
  agent: string;
  confirmationType: ConfirmationType;
  cost: string | null;
  expiresAt: Date;
  status: ProposalStatus;
  quorum: number;
  approvals: Array<{ approver: string; at: Date }>;
  decision: { by: string; at: Date; reason: string | null } | null;
  /** The result as chat may show it: scrubbed of secrets, short, or the operation's `result` template. */
  result: string | null;
  error: string | null;
  /** Reminders sent while it waited, and when it was escalated. */
  reminders?: number;
  /** Durations an approver may choose for "Approve for…" (ms); empty or absent when grants are off. */
  grantDurationsMs?: number[];
  escalatedAt?: Date | null;
  /** Link to the proposal in the web console, when TWOKEY_PUBLIC_URL is set. */
  consoleUrl: string | null;
  /**
   * The audit events of this proposal, oldest first, as one line each. Read only for `postTrail`
   * (empty otherwise): the message itself does not show it.
   */
  trail: string[];
}

export interface ChatMessageRef {
  channel: string;
  messageId: string;
}

/** Sends and edits proposal messages on one platform. Called from the outbox, after commit. */
export interface ChatPublisher {
  readonly platform: ChatPlatformName;
  post(channel: string, view: ProposalMessageView): Promise<ChatMessageRef>;
  update(ref: ChatMessageRef, view: ProposalMessageView): Promise<void>;
  /** Once the proposal is final: its decision trail (Slack posts it as a thread reply). */
  postTrail?(ref: ChatMessageRef, view: ProposalMessageView): Promise<void>;
  /**
   * A reminder or an escalation, mentioning who may decide: a reply to the proposal's message, or a
   * message of its own in `channel` (an escalation's configured channel) pointing back to it.
   */
  postFollowUp?(ref: ChatMessageRef, view: ProposalMessageView, followUp: ChatFollowUp): Promise<void>;
}

/** One chat platform wired into twokey: where humans click, and how messages reach them. */
export interface ChatIntegration {
  publisher: ChatPublisher;
  /** Adds the platform's HTTP endpoints (`/slack/events`, `/discord/interactions`) to the server. */
  registerRoutes?(app: FastifyInstance): void | Promise<void>;
  /** Opens long-lived connections (Slack Socket Mode, the Discord gateway). */
  start?(): Promise<void>;
  stop?(): Promise<void>;
  /** Outbox handlers for the jobs this platform queues (its stored clicks), by job kind. */
  jobHandlers?: Partial<JobHandlers>;
}

export interface ChatFollowUp {
  kind: 'remind' | 'escalate';
  /** Identities to mention (`slack:U…`, `slack:group:S…`, `discord:role:…`). */
  mention: string[];
  channel: string | null;
}
