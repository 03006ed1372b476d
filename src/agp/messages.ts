import { TwokeyError } from '../core/errors.js';

/**
 * The AGP dialect's refusals. The first four texts are the AGP reference gateway's, word for word:
 * agents written for it compare them, so they are part of the protocol, not wording to polish.
 */
export const agpMessages = {
  missingToken: 'Execute confirmation required. Provide x-confirmation-token header.',
  invalidToken: 'Invalid confirmation token.',
  expired: 'Confirmation token expired. Prepare a new token.',
  mismatch: 'Confirmation token does not match this execute request.',
  consumed: 'Confirmation token has already been used. Prepare a new token.',
  notApproved: 'Confirmation token has not been approved yet.',
  rejected: 'Confirmation was rejected.',
  cancelled: 'Confirmation was cancelled. Prepare a new token.',
  amountNotNumber: (path: string) => `Execute amount at ${path} must be a non-negative integer number of cents.`,
  amountExceeds: (limitCents: number) => `Execute amount exceeds policy limit (${limitCents} cents).`,
} as const;

/**
 * The closed set of codes has no dedicated code for a missing token or an amount over the ceiling;
 * these are the nearest ones, and the message says exactly which check failed.
 */
export const agpRefusal = {
  missingToken: () => new TwokeyError('invalid_token', agpMessages.missingToken),
  invalidToken: () => new TwokeyError('invalid_token', agpMessages.invalidToken),
  expired: () => new TwokeyError('expired', agpMessages.expired),
  mismatch: () => new TwokeyError('params_mismatch', agpMessages.mismatch),
  // Another agent's token gets the same text as any mismatch: the stricter binding is twokey's, and
  // the AGP text is what agents already handle.
  otherPrincipal: () => new TwokeyError('principal_mismatch', agpMessages.mismatch),
  consumed: () => new TwokeyError('consumed', agpMessages.consumed),
  notApproved: () => new TwokeyError('not_approved', agpMessages.notApproved),
  rejected: () => new TwokeyError('rejected', agpMessages.rejected),
  cancelled: () => new TwokeyError('invalid_token', agpMessages.cancelled),
  amountNotNumber: (path: string) => new TwokeyError('operation_not_allowed', agpMessages.amountNotNumber(path)),
  amountExceeds: (limitCents: number) => new TwokeyError('operation_not_allowed', agpMessages.amountExceeds(limitCents)),
};
