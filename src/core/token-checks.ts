/**
 * The one order a confirmation token is checked in before it is consumed, for `/v1`'s commit
 * (`src/core/execution.ts`) and AGP's execute (`src/agp/policy.ts`):
 *
 * 1. `invalid_token` — no such token (a hash comparison: cheap, and it says nothing).
 * 2. `principal_mismatch` — issued to another agent. Before anything about the token's state, so
 *    an agent holding another's leaked token learns nothing about it (used? expired?).
 * 3. `consumed` — already used (the caller may answer the very same request again with what it
 *    stored instead).
 * 4. `expired` — a token is valid for [issued, expiresAt): at `expiresAt` exactly it has expired.
 * 5. the binding — issued for another request (operation or params; AGP: business or request).
 *
 * Only a token that passes all five is consumed, under its row lock, in the same transaction.
 */

/** What a token's checks read: when it expires and whether it was used. */
export interface CheckedToken {
  expiresAt: Date;
  consumedAt: Date | null;
}

export type HolderCheck = 'invalid_token' | 'principal_mismatch';
export type TokenCheck<Binding extends string> = HolderCheck | 'consumed' | 'expired' | Binding;

/** Checks 1 and 2: the token exists and is the caller's. */
export function failedHolderCheck<T>(token: T | null, heldByCaller: (token: T) => boolean): HolderCheck | null {
  if (!token) return 'invalid_token';
  if (!heldByCaller(token)) return 'principal_mismatch';
  return null;
}

/** The first of the five checks the token fails, or null when it may be consumed. */
export function failedTokenCheck<T extends CheckedToken, Binding extends string>(
  token: T | null,
  checks: { heldByCaller(token: T): boolean; bindingMismatch(token: T): Binding | null },
  now: Date,
): TokenCheck<Binding> | null {
  if (!token) return 'invalid_token';
  const holder = failedHolderCheck(token, checks.heldByCaller);
  if (holder) return holder;
  if (token.consumedAt) return 'consumed';
  if (now.getTime() >= token.expiresAt.getTime()) return 'expired';
  return checks.bindingMismatch(token);
}
