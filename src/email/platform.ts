import * as z from 'zod';
import type { ChatPlatformDeclaration } from '../core/chat-platform.js';

/**
 * Email as the registry sees it (src/platforms/index.ts), without nodemailer: its identity, its part
 * of an operation's config, its variables. The integration is `index.ts`.
 */

/** A mailbox as SMTP takes it without quoting: a dot-atom local part and a domain of labels. */
export const EMAIL_ADDRESS =
  /^(?=.{3,254}$)[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

/** Mail goes to the operation's `email:` approvers themselves, so the part names no channel. */
const approvalPart = z.strictObject({});
const escalatePart = z.strictObject({});

const envSchema = z.object({
  TWOKEY_SMTP_HOST: z.string().optional(),
  TWOKEY_SMTP_PORT: z
    .string()
    .regex(/^\d{1,5}$/, { error: 'expected a port between 1 and 65535' })
    .transform(Number)
    .refine((port) => port >= 1 && port <= 65_535, { error: 'expected a port between 1 and 65535' })
    .default(587),
  TWOKEY_SMTP_SECURE: z.enum(['tls', 'starttls', 'none'], { error: 'expected one of: tls, starttls, none' }).default('starttls'),
  TWOKEY_SMTP_USER: z.string().optional(),
  TWOKEY_SMTP_PASSWORD: z.string().optional(),
  TWOKEY_EMAIL_FROM: z
    .string()
    .regex(/^(?:[^<>\r\n]*<[^<>\s@]+@[^<>\s@]+>|[^<>\s@]+@[^<>\s@]+)$/, {
      error: 'expected an address (approvals@example.com) or a name and an address (twokey <approvals@example.com>)',
    })
    .optional(),
});

export const emailPlatform = {
  name: 'email' as const,
  label: 'email',
  identityForms: [{ kind: 'email_user', prefix: 'email:', pattern: EMAIL_ADDRESS, person: true, shown: 'email:<address>', example: 'email:alice@example.com' }],
  approvalPart,
  escalatePart,
  reachesApproversDirectly: true,
  describePart: () => 'a mail to each email: approver',
  examples: { approval: {}, escalate: {} },
  env: {
    schema: envSchema,
    issues(vars) {
      const issues: string[] = [];
      if (vars.TWOKEY_SMTP_HOST !== undefined) {
        if (vars.TWOKEY_EMAIL_FROM === undefined) issues.push('TWOKEY_EMAIL_FROM: required when TWOKEY_SMTP_HOST is set');
        // The mail's links lead to twokey: without its public address there is nothing to click.
        if (vars.TWOKEY_PUBLIC_URL === undefined) issues.push('TWOKEY_PUBLIC_URL: required when TWOKEY_SMTP_HOST is set (approval mails link to it)');
      }
      if (vars.TWOKEY_SMTP_PASSWORD !== undefined && vars.TWOKEY_SMTP_USER === undefined)
        issues.push('TWOKEY_SMTP_USER: required when TWOKEY_SMTP_PASSWORD is set');
      return issues;
    },
    isConfigured: (env) => Boolean(env.TWOKEY_SMTP_HOST),
  },
  clickJobs: {},
} satisfies ChatPlatformDeclaration<z.output<typeof approvalPart>, z.output<typeof escalatePart>>;

declare module '../core/chat-platform.js' {
  interface ChatPlatformParts {
    email: { approval: z.output<typeof approvalPart>; escalate: z.output<typeof escalatePart> };
  }
}
