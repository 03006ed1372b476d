import { createHash, randomBytes } from 'node:crypto';

/**
 * A decision link's token: `tk_mail_` + 43 base64url characters (32 random bytes). The mail holds it;
 * the database holds only its SHA-256, so a copy of the database approves nothing. The log scrubber
 * knows the shape (src/lib/secrets.ts), so a request line with it is logged as `[REDACTED]`.
 */
export const LINK_TOKEN = /^tk_mail_[A-Za-z0-9_-]{43}$/;

export const newLinkToken = (): string => `tk_mail_${randomBytes(32).toString('base64url')}`;

export const linkTokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

export type LinkAction = 'approve' | 'reject';

export const LINK_ACTIONS: readonly LinkAction[] = ['approve', 'reject'];

/** The confirm page of one action: the proposal id in the path lets a pasted link of another proposal be told apart. */
export function linkUrl(publicUrl: string, action: LinkAction, proposalId: string, token: string): string {
  return new URL(`/email/${action}/${encodeURIComponent(proposalId)}/${token}`, publicUrl).toString();
}

/** Where the confirm page's form posts. */
export const DECIDE_PATH = '/email/decide';
