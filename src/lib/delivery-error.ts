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
