import type { FastifyBaseLogger } from 'fastify';
import type { ChatPlatformContext } from '../chat/platform-module.js';
import type { ChatIntegration } from '../chat/types.js';
import type { Env } from '../config/env.js';
import type { EmailServices, EmailStore } from './ports.js';
import { createEmailPublisher } from './publisher.js';
import { registerEmailRoutes } from './routes.js';
import { createSmtpSender, type MailSender, type SmtpSettings } from './transport.js';
import { silentLogger } from '../chat/silent-logger.js';

export { cardToEmail, type EmailLinks, type EmailMessage } from './message.js';
export { createSmtpSender, type MailSender, type SmtpSettings } from './transport.js';
export type { EmailLinkRow, EmailMessageRow, EmailServices, EmailStore } from './ports.js';

export type EmailEnv = Pick<
  Env,
  'TWOKEY_SMTP_HOST' | 'TWOKEY_SMTP_PORT' | 'TWOKEY_SMTP_SECURE' | 'TWOKEY_SMTP_USER' | 'TWOKEY_SMTP_PASSWORD' | 'TWOKEY_EMAIL_FROM' | 'TWOKEY_PUBLIC_URL'
>;

/** Email is on when an SMTP server is named (the rest is then required at start, see src/config/env.ts). */
export const isEmailConfigured = (env: Pick<Env, 'TWOKEY_SMTP_HOST'>): boolean => env.TWOKEY_SMTP_HOST !== undefined;

export function smtpSettingsOf(env: EmailEnv): SmtpSettings {
  if (!env.TWOKEY_SMTP_HOST || !env.TWOKEY_EMAIL_FROM) throw new Error('TWOKEY_SMTP_HOST and TWOKEY_EMAIL_FROM are required for email');
  return {
    host: env.TWOKEY_SMTP_HOST,
    port: env.TWOKEY_SMTP_PORT,
    security: env.TWOKEY_SMTP_SECURE,
    user: env.TWOKEY_SMTP_USER,
    password: env.TWOKEY_SMTP_PASSWORD,
    from: env.TWOKEY_EMAIL_FROM,
  };
}

export interface EmailIntegrationOptions {
  env: EmailEnv;
  services: EmailServices;
  /** Defaults to `services.emailStore`. */
  store?: EmailStore;
  logger?: FastifyBaseLogger;
  /** Defaults to SMTP through nodemailer, as the environment says. */
  sender?: MailSender;
}

/** The domain of the From address: Message-IDs are made under it. */
function domainOf(from: string): string {
  const address = /<([^<>]+)>\s*$/.exec(from)?.[1] ?? from;
  return address.slice(address.lastIndexOf('@') + 1).trim() || 'twokey.invalid';
}

/**
 * Email as an approval channel: each `email:` approver of a proposal gets a mail with their own
 * one-time Approve and Reject links (`src/email/README.md`); the links open a confirm page whose form
 * decides through the core, and the outcome follows as a reply in the same thread.
 */
export function createEmailIntegration(options: EmailIntegrationOptions): ChatIntegration {
  const { env, services } = options;
  const store = options.store ?? services.emailStore;
  const publicUrl = env.TWOKEY_PUBLIC_URL;
  if (!publicUrl) throw new Error('TWOKEY_PUBLIC_URL is required for email: the mails link to it');
  const settings = smtpSettingsOf(env);
  const sender = options.sender ?? createSmtpSender(settings);
  let logger: FastifyBaseLogger | undefined = options.logger?.child({ platform: 'email' });
  const log = () => logger ?? silentLogger;
  const publisher = createEmailPublisher({ services, store, sender, publicUrl, messageDomain: domainOf(settings.from), logger: log });
  return {
    publisher,
    async registerRoutes(app) {
      logger ??= app.log.child({ platform: 'email' });
      await registerEmailRoutes(app, { services, store, publicUrl, logger: log });
    },
    async stop() {
      sender.close();
    },
  };
}

/** The module the runtime loads when TWOKEY_SMTP_HOST is set (src/runtime/integrations.ts). */
export function create({ env, services, logger }: ChatPlatformContext<EmailServices>): ChatIntegration {
  return createEmailIntegration({ env, services, logger });
}
