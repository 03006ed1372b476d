import type { FastifyReply, FastifyRequest } from 'fastify';

/** The token of an `Authorization: Bearer …` header; null when the header is absent or another scheme. */
export function bearerToken(request: Pick<FastifyRequest, 'headers'>): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
  return match?.[1] ?? null;
}

/**
 * Counts refused credentials (see src/limits). Only refusals reach it: an accepted token is never
 * held back by anyone's failures, so callers sharing an address cannot lock each other out.
 */
export interface FailedAuthCounter {
  /** Counts one refusal (`token` null when none was sent); what to answer instead once this caller is over its limit. */
  recordFailure(request: FastifyRequest, token: string | null): { error: Error; retryAfterSeconds: number } | null;
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
 * its body is read. The token is always checked first; a refusal is then counted, and past the
 * caller's limit answered with the counter's error (429) and `Retry-After`. A missing header counts
 * as a refusal too: probing without a key is probing.
 */
export function bearerAuthHook<Principal>(options: BearerAuthOptions<Principal>) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const token = bearerToken(request);
    try {
      if (token === null) throw options.missingToken();
      options.attach(request, await options.authenticate(token));
    } catch (error) {
      const limited = options.isRefusal(error) ? options.failures?.recordFailure(request, token) : null;
      if (!limited) throw error;
      reply.header('retry-after', String(limited.retryAfterSeconds));
      throw limited.error;
    }
  };
}
