import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { approvalCard, followUpCard } from '../chat/card.js';
import type { ChatFollowUp, ChatMessageRef, ChatPublisher, ProposalMessageView } from '../chat/types.js';
import { approversOf, isFinalStatus } from '../core/model.js';
import { proposalBindingHash } from '../core/step-up.js';
import { linkTokenHash, linkUrl, newLinkToken } from './links.js';
import { EMAIL_ADDRESS } from './platform.js';
import { cardToEmail, followUpToEmail } from './message.js';
import type { EmailServices, EmailStore } from './ports.js';
import type { MailSender } from './transport.js';

export interface EmailPublisherOptions {
  services: EmailServices;
  store: EmailStore;
  sender: MailSender;
  /** TWOKEY_PUBLIC_URL: where the links in a mail lead. */
  publicUrl: string;
  /** The domain of Message-IDs (the From address's). */
  messageDomain: string;
  logger: () => FastifyBaseLogger;
}

/** The address an `email:` approver names, or null for every other identity. */
export function emailAddressOf(identity: string): string | null {
  const address = identity.startsWith('email:') ? identity.slice('email:'.length) : null;
  return address !== null && EMAIL_ADDRESS.test(address) ? address : null;
}

const recipientKey = (recipient: string): string => createHash('sha256').update(recipient).digest('hex').slice(0, 16);

/**
 * Email as a chat platform: the first sync mails each `email:` approver of the proposal one message
 * with their own Approve and Reject links; once the proposal is final, the outcome is mailed as a
 * reply in each recipient's thread. A mail carries its state at the time it was sent: it cannot be
 * edited, so between those two nothing is sent (the confirm page shows the current state).
 *
 * Retries are safe: a recipient whose mail left is skipped; one whose mail did not is sent a new
 * link (the one never delivered stays unused and dies with the proposal).
 */
export function createEmailPublisher(options: EmailPublisherOptions): ChatPublisher {
  const { services, store, sender, publicUrl, messageDomain } = options;
  const messageIdFor = (proposalId: string, recipient: string, part: string) => `<${proposalId}.${recipientKey(recipient)}.${part}@${messageDomain}>`;

  async function mailRequests(view: ProposalMessageView): Promise<void> {
    const proposal = await services.store.getProposal(view.id);
    const operation = proposal ? services.operation(proposal.operation) : undefined;
    if (!proposal || !operation || proposal.status !== 'pending') return;
    const recipients = approversOf(proposal, operation).filter((identity) => emailAddressOf(identity) !== null);
    const sent = await store.listMessages(proposal.id);
    const bindingHash = proposalBindingHash(proposal);
    const card = approvalCard(view);
    for (const recipient of recipients) {
      const earlier = sent.find((row) => row.recipient === recipient);
      if (earlier?.sentAt) continue;
      const now = services.clock();
      const token = newLinkToken();
      await store.insertLink({
        tokenHash: linkTokenHash(token),
        proposalId: proposal.id,
        approver: recipient,
        bindingHash,
        expiresAt: proposal.expiresAt,
        createdAt: now,
      });
      const mail = cardToEmail(card, {
        approve: linkUrl(publicUrl, 'approve', proposal.id, token),
        reject: linkUrl(publicUrl, 'reject', proposal.id, token),
      });
      const messageId = earlier?.messageId ?? messageIdFor(proposal.id, recipient, 'request');
      const subject = earlier?.subject ?? mail.subject;
      if (!earlier) await store.insertMessage({ proposalId: proposal.id, recipient, messageId, subject, createdAt: now });
      await sender.send({ to: emailAddressOf(recipient) ?? '', subject, text: mail.text, html: mail.html, messageId });
      await store.markSent(proposal.id, recipient, services.clock());
      options.logger().info({ proposalId: proposal.id, recipient }, 'approval request mailed');
    }
  }

  async function mailOutcome(view: ProposalMessageView): Promise<void> {
    const mail = cardToEmail(approvalCard(view));
    for (const row of await store.listMessages(view.id)) {
      if (!row.sentAt || row.outcomeSentAt) continue;
      await sender.send({
        to: emailAddressOf(row.recipient) ?? '',
        subject: `Re: ${row.subject}`,
        text: mail.text,
        html: mail.html,
        messageId: messageIdFor(view.id, row.recipient, 'outcome'),
        inReplyTo: row.messageId,
        references: row.messageId,
      });
      await store.markOutcomeSent(view.id, row.recipient, services.clock());
      options.logger().info({ proposalId: view.id, recipient: row.recipient, status: view.status }, 'outcome mailed');
    }
  }

  /**
   * A reminder, as a reply in each thread whose recipient is still asked and has not approved. An
   * escalation needs no reply: the approvers it adds are mailed the request itself by the sync that
   * follows it.
   */
  async function mailFollowUp(view: ProposalMessageView, followUp: ChatFollowUp): Promise<void> {
    if (followUp.kind !== 'remind' || view.status !== 'pending') return;
    const approved = new Set(view.approvals.map((approval) => approval.approver));
    const mail = followUpToEmail(followUpCard(view, followUp));
    for (const row of await store.listMessages(view.id)) {
      if (!row.sentAt || approved.has(row.recipient) || !followUp.mention.includes(row.recipient)) continue;
      await sender.send({
        to: emailAddressOf(row.recipient) ?? '',
        subject: `Re: ${row.subject}`,
        text: mail.text,
        html: mail.html,
        messageId: messageIdFor(view.id, row.recipient, `remind-${view.reminders ?? 0}`),
        inReplyTo: row.messageId,
        references: row.messageId,
      });
    }
  }

  return {
    platform: 'email',

    postFollowUp: (_ref, view, followUp) => mailFollowUp(view, followUp),

    async post(_channel, view): Promise<ChatMessageRef> {
      if (view.status === 'pending') await mailRequests(view);
      // Decided before its first sync (a rule, a grant): nobody was asked, so nobody is told.
      return { channel: 'email', messageId: view.id };
    },

    async update(_ref, view): Promise<void> {
      // A request that failed to reach someone on its first sync is sent on the next one, while it waits.
      if (view.status === 'pending') await mailRequests(view);
      if (isFinalStatus(view.status)) await mailOutcome(view);
    },
  };
}
