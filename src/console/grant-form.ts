import type { GrantRequest } from '../core/grant-service.js';
import type { OperationSpec } from '../core/model.js';
import { TwokeyError } from '../core/errors.js';
import { formatDuration } from './layout.js';
import { field } from './respond.js';

/** The most uses a grant may be given, as the core allows. */
export const MAX_GRANT_USES = 10_000;

/**
 * The "Approve for…" form as the core's grant request. Each refusal names the field: a forged or
 * stale form (a duration no longer offered) gets a 400 that says what to change, and nothing is approved.
 */
export function grantRequestFrom(body: unknown, settings: NonNullable<OperationSpec['grants']>): GrantRequest {
  const durationText = field(body, 'duration') ?? '';
  const durationMs = /^\d{1,12}$/.test(durationText) ? Number(durationText) : Number.NaN;
  if (!settings.durationsMs.includes(durationMs)) {
    throw new TwokeyError('invalid_request', `“Approve for” (duration) must be one of: ${settings.durationsMs.map(formatDuration).join(', ')}`);
  }
  const usesText = (field(body, 'uses') ?? '').trim();
  const maxUses = usesText === '' ? null : /^\d{1,6}$/.test(usesText) ? Number(usesText) : Number.NaN;
  if (maxUses !== null && !(maxUses >= 1 && maxUses <= MAX_GRANT_USES)) {
    throw new TwokeyError('invalid_request', `“At most this many proposals” (uses) must be empty or a whole number from 1 to ${MAX_GRANT_USES}`);
  }
  const boundedText = field(body, 'bounded');
  if (boundedText !== undefined && boundedText !== 'yes') throw new TwokeyError('invalid_request', '“Bounds” (bounded) is a checkbox: “yes” or absent');
  return { durationMs, maxUses, bounded: boundedText === 'yes' };
}
