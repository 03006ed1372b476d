import type { FastifyRequest } from 'fastify';

/** The token of an `Authorization: Bearer …` header; null when the header is absent or another scheme. */
export function bearerToken(request: Pick<FastifyRequest, 'headers'>): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
  return match?.[1] ?? null;
}

/** Counts refused credentials per caller, so guessing keys is slowed (see src/limits). */
export interface FailedAuthCounter {
  /** Throws when this caller has failed too often lately. */
  check(request: FastifyRequest): void;
  recordFailure(request: FastifyRequest): void;
}

export interface BearerAuthOptions<Principal> {
  /** Who the token belongs to; throws to refuse it. */
  authenticate(token: string): Promise<Principal>;
  /** What to throw when no bearer token was sent. */
  missingToken(): Error;
  /** Whether a thrown error is a refused credential (counted by `failures`) rather than a fault. */
  isRefusal(error: unknown): boolean;
  /** Keeps the principal for the handlers (a request decoration). */
  attach(request: FastifyRequest, principal: Principal): void;
  failures?: FailedAuthCounter;
}

/**
 * An `onRequest` hook that turns the bearer token into a principal, or refuses the request before
 * its body is read. A missing header counts as a refusal too: probing without a key is probing.
 */
export function bearerAuthHook<Principal>(options: BearerAuthOptions<Principal>) {
  return async (request: FastifyRequest): Promise<void> => {
    options.failures?.check(request);
    try {
      const token = bearerToken(request);
      if (token === null) throw options.missingToken();
      options.attach(request, await options.authenticate(token));
    } catch (error) {
      if (options.isRefusal(error)) options.failures?.recordFailure(request);
      throw error;
    }
  };
}
