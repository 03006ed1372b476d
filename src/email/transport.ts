import nodemailer from 'nodemailer';
import { DeliveryError } from '../lib/delivery-error.js';

/** How twokey reaches its SMTP server (TWOKEY_SMTP_*, see .env.example). */
export interface SmtpSettings {
  host: string;
  port: number;
  /** `tls`: TLS from the first byte (port 465); `starttls`: plain, then STARTTLS, required; `none`: no TLS (a relay on the same host). */
  security: 'tls' | 'starttls' | 'none';
  user?: string | undefined;
  password?: string | undefined;
  /** The From address: `twokey <approvals@example.com>` or a bare address. */
  from: string;
  /** Every SMTP step (connect, greeting, each command) is bounded by this. */
  timeoutMs?: number;
}

export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
  html: string;
  /** `<…@…>`: kept per proposal per recipient, so the outcome can reply in the same thread. */
  messageId: string;
  inReplyTo?: string;
  references?: string;
}

/** Sends one mail; a failure is a `DeliveryError` the outbox retries (or buries, when `permanent`). */
export interface MailSender {
  send(mail: OutgoingMail): Promise<void>;
  close(): void;
}

/**
 * nodemailer over SMTP. Its own logger stays off: it would print the conversation, links included.
 * The password goes to the transport and nowhere else.
 */
export function createSmtpSender(settings: SmtpSettings): MailSender {
  const timeout = settings.timeoutMs ?? 20_000;
  const transport = nodemailer.createTransport({
    host: settings.host,
    port: settings.port,
    secure: settings.security === 'tls',
    requireTLS: settings.security === 'starttls',
    ignoreTLS: settings.security === 'none',
    ...(settings.user ? { auth: { user: settings.user, pass: settings.password ?? '' } } : {}),
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
    logger: false,
    debug: false,
  });
  return {
    async send(mail) {
      try {
        await transport.sendMail({
          from: settings.from,
          to: mail.to,
          subject: mail.subject,
          text: mail.text,
          html: mail.html,
          messageId: mail.messageId,
          ...(mail.inReplyTo ? { inReplyTo: mail.inReplyTo } : {}),
          ...(mail.references ? { references: mail.references } : {}),
          // Automated: auto-responders and vacation replies stay away from the thread.
          headers: { 'Auto-Submitted': 'auto-generated' },
        });
      } catch (error) {
        throw toDeliveryError(error);
      }
    },
    close: () => transport.close(),
  };
}

/** 5xx answers (no such mailbox, refused sender, bad credentials) do not get better by waiting. */
function toDeliveryError(error: unknown): DeliveryError {
  const code = typeof error === 'object' && error !== null ? (error as { responseCode?: unknown }).responseCode : undefined;
  const smtpCode = typeof code === 'number' ? code : null;
  const kind = typeof error === 'object' && error !== null ? String((error as { code?: unknown }).code ?? 'error') : 'error';
  const permanent = smtpCode !== null && smtpCode >= 500;
  // The server's own words are not repeated: they may quote the address or the command sent.
  return new DeliveryError(`SMTP delivery failed (${smtpCode ?? kind})`, { permanent });
}
