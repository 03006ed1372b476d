/**
 * The closed set of failures twokey reports. Every transport maps a code to its own form
 * (HTTP status, ephemeral chat message, CLI exit), so the code is the contract, the message is
 * for humans. Messages never contain secrets.
 */
export const errorStatus = {
  invalid_request: 400,
  invalid_json: 400,
  invalid_params: 400,
  unauthorized: 401,
  operation_not_allowed: 403,
  not_an_approver: 403,
  owner_cannot_approve: 403,
  /** The operation needs a passkey approval (`stepUp: passkey`): a click answers with the console link. */
  step_up_required: 403,
  /** A passkey assertion was missing a part, wrong, or made for something else. */
  step_up_failed: 403,
  // Commit checks, in the order they run.
  invalid_token: 403,
  consumed: 403,
  expired: 403,
  principal_mismatch: 403,
  operation_mismatch: 403,
  params_mismatch: 403,
  rejected: 403,
  not_approved: 403,
  not_found: 404,
  unknown_operation: 404,
  not_pending: 409,
  nothing_to_retry: 409,
  operation_removed: 409,
  conflict: 409,
  idempotency_key_reused: 422,
  payload_too_large: 413,
  rate_limited: 429,
  internal: 500,
  execution_failed: 502,
  unavailable: 503,
  /** The database cannot be reached right now; the answer carries Retry-After. */
  database_unavailable: 503,
  // The embedded database is short of disk space: writes are refused until it is freed.
  insufficient_storage: 507,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export interface ErrorDetail {
  path: string;
  message: string;
}

export class TwokeyError extends Error {
  override readonly name = 'TwokeyError';

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }

  get status(): number {
    return errorStatus[this.code];
  }
}

/**
 * Why a caller was refused, named by the check that refused it: /metrics counts 401s and 429s by
 * it (`twokey_auth_refusals_total`, `twokey_rate_limit_refusals_total`). Never the credential.
 */
export type RefusalReason = 'missing_key' | 'unknown_key' | 'revoked_key' | 'requests' | 'failed_auth' | 'long_polls' | 'pending_proposals';

/** A 401 or 429 that says which check refused the caller. */
export class RefusalError extends TwokeyError {
  constructor(
    code: 'unauthorized' | 'rate_limited',
    readonly reason: RefusalReason,
    message: string,
  ) {
    super(code, message);
  }
}

export function isTwokeyError(value: unknown): value is TwokeyError {
  return value instanceof TwokeyError;
}
