import type { FastifyInstance } from 'fastify';
import type { ConfirmationType, ProposalStatus } from '../core/model.js';

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
  result: unknown;
  error: string | null;
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

/**
 * A failed delivery. `retryAfterMs` honours the platform's Retry-After; `permanent` failures
 * (a channel that does not exist, a revoked token) are not retried.
 */
export class DeliveryError extends Error {
  override readonly name = 'DeliveryError';
  constructor(
    message: string,
    readonly options: { retryAfterMs?: number; permanent?: boolean } = {},
  ) {
    super(message);
  }
}

/** Sends and edits proposal messages on one platform. Called from the outbox, after commit. */
export interface ChatPublisher {
  readonly platform: 'slack' | 'discord';
  post(channel: string, view: ProposalMessageView): Promise<ChatMessageRef>;
  update(ref: ChatMessageRef, view: ProposalMessageView): Promise<void>;
  /** Once the proposal is final: its decision trail (Slack posts it as a thread reply). */
  postTrail?(ref: ChatMessageRef, view: ProposalMessageView): Promise<void>;
}

/** One chat platform wired into twokey: where humans click, and how messages reach them. */
export interface ChatIntegration {
  publisher: ChatPublisher;
  /** Adds the platform's HTTP endpoints (`/slack/events`, `/discord/interactions`) to the server. */
  registerRoutes?(app: FastifyInstance): void | Promise<void>;
  /** Opens long-lived connections (Slack Socket Mode, the Discord gateway). */
  start?(): Promise<void>;
  stop?(): Promise<void>;
}
