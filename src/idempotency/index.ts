import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TwokeyError } from '../core/errors.js';
import { bearerToken } from '../lib/bearer-auth.js';
import type { Clock } from '../core/model.js';
import { canonicalJson, sha256Hex } from '../core/secrets.js';
import type { IdempotencyClaim, IdempotencyStore } from './ports.js';
import { sealResponse, unseal } from './seal.js';

export type { IdempotencyStore } from './ports.js';

/**
 * `Idempotency-Key` for any fastify route (Stripe's and the IETF httpapi draft's semantics):
 * - the same key with the same request replays the first response (status and body), running nothing;
 * - the same key with another request is refused with 422; while the first still runs, 409;
 * - keys are scoped per agent and kept 24 hours.
 * Only 2xx responses are kept: a 4xx or 5xx from twokey means nothing happened (a refused token, a
 * failed execution that stays retryable), so the key is freed and a retry gets today's answer — an
 * agent that executed before the approval came must be able to retry with its key once it comes.
 */

export interface IdempotencyPrincipal {
  /** The agent id: keys are scoped by it. */
  id: string;
  /** The caller's raw API key; seals the stored response (see seal.ts). Never stored. */
  secret: string;
}

export interface IdempotencyDeps<Attached = never> {
  store: IdempotencyStore<Attached>;
  clock: Clock;
  /** How long a key is remembered; 24 hours. */
  retentionMs?: number;
  /** An in-flight key older than this belongs to a process that died; the same request may take it over. */
  staleAfterMs?: number;
  /**
   * Responses larger than this are not kept: the key is then spent (409 on reuse, 422 with another
   * request) rather than replayable, so one agent cannot fill the table with large bodies. 64 KiB.
   */
  maxStoredResponseBytes?: number;
  /** Who sent the request; default: the authenticated agent and the bearer key it authenticated with. */
  principal?(request: FastifyRequest): IdempotencyPrincipal | null;
}

export const IDEMPOTENCY_RETENTION_MS = 24 * 3_600_000;
const DEFAULT_STALE_AFTER_MS = 2 * 60_000;
export const DEFAULT_MAX_STORED_RESPONSE_BYTES = 64 * 1024;
// Visible ASCII only: the key is echoed in logs and must not smuggle control characters.
const VALID_KEY = /^[\x21-\x7e]{1,255}$/;
const ATTEMPTS = 3;

function bearerPrincipal(request: FastifyRequest): IdempotencyPrincipal | null {
  const secret = bearerToken(request);
  return request.agent && secret ? { id: request.agent.id, secret } : null;
}

/** What "the same request" means: method, path and the canonical body (RFC 8785), not header order or spacing. */
export function idempotencyRequestHash(request: Pick<FastifyRequest, 'method' | 'url' | 'body'>): string {
  const path = request.url.split('?')[0] ?? '';
  return sha256Hex(canonicalJson({ method: request.method, path, body: request.body ?? null }));
}

interface Claimed<Attached> {
  claim: IdempotencyClaim;
  secret: string;
  attached?: Attached;
}

export function createIdempotency<Attached = never>(deps: IdempotencyDeps<Attached>) {
  const retentionMs = deps.retentionMs ?? IDEMPOTENCY_RETENTION_MS;
  const staleAfterMs = deps.staleAfterMs ?? DEFAULT_STALE_AFTER_MS;
  const principalOf = deps.principal ?? bearerPrincipal;
  const maxStoredBytes = deps.maxStoredResponseBytes ?? DEFAULT_MAX_STORED_RESPONSE_BYTES;
  // Per-request state without decorating fastify's request type.
  const claims = new WeakMap<FastifyRequest, Claimed<Attached>>();

  const scopeOf = (claim: Pick<IdempotencyClaim, 'agentId' | 'key'>): string => `${claim.agentId}\u0000${claim.key}`;

  function readKey(request: FastifyRequest): string | null {
    const header = request.headers['idempotency-key'];
    if (header === undefined) return null;
    const key = Array.isArray(header) ? null : header.trim();
    if (key === null || !VALID_KEY.test(key)) {
      throw new TwokeyError('invalid_request', 'Idempotency-Key must be one header of 1 to 255 visible ASCII characters');
    }
    return key;
  }

  async function preHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const key = readKey(request);
    if (key === null) return undefined;
    const principal = principalOf(request);
    if (!principal) throw new TwokeyError('unauthorized', 'Idempotency-Key needs an authenticated agent');
    const requestHash = idempotencyRequestHash(request);

    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const now = deps.clock();
      const claim: IdempotencyClaim = {
        agentId: principal.id,
        key,
        requestHash,
        createdAt: now,
        expiresAt: new Date(now.getTime() + retentionMs),
      };
      if (await deps.store.acquire(claim, new Date(now.getTime() - staleAfterMs))) {
        claims.set(request, { claim, secret: principal.secret });
        return undefined;
      }
      const existing = await deps.store.get(principal.id, key);
      // Freed or expired between the two reads: take it on the next attempt.
      if (!existing || existing.expiresAt.getTime() <= now.getTime()) continue;
      if (existing.requestHash !== requestHash) {
        throw new TwokeyError('idempotency_key_reused', 'this Idempotency-Key was already used for a different request; use a new key for a new request');
      }
      if (existing.status === 'in_flight') {
        throw new TwokeyError('conflict', 'a request with this Idempotency-Key is still being processed; retry once it has finished');
      }
      const body = unseal(existing.responseBody, principal.secret, scopeOf(claim));
      if (existing.responseStatus !== null && existing.responseBody === null) {
        throw new TwokeyError(
          'conflict',
          `this Idempotency-Key was already used, and its response was larger than ${maxStoredBytes} bytes, so it was not kept to replay`,
        );
      }
      if (body === null || existing.responseStatus === null) {
        throw new TwokeyError('conflict', 'this Idempotency-Key was already used, and its response cannot be replayed with this API key');
      }
      return reply.status(existing.responseStatus).header('idempotent-replayed', 'true').type('application/json; charset=utf-8').send(body);
    }
    throw new TwokeyError('conflict', 'this Idempotency-Key is contended; retry');
  }

  async function onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
    const claimed = claims.get(request);
    if (!claimed) return payload;
    claims.delete(request);
    const { claim, secret, attached } = claimed;
    const status = reply.statusCode;
    const succeeded = status >= 200 && status < 300 && typeof payload === 'string';
    try {
      if (succeeded) {
        // Written before the response leaves: a client that saw the response will see it replayed.
        const tooLarge = Buffer.byteLength(payload, 'utf8') > maxStoredBytes;
        await deps.store.complete(claim.agentId, claim.key, claim.createdAt, status, tooLarge ? null : sealResponse(payload, secret, scopeOf(claim)), attached);
      } else {
        await deps.store.release(claim.agentId, claim.key, claim.createdAt, attached);
      }
    } catch (error) {
      // Without attached rows the response is already decided; a key left in flight is taken over once it is stale.
      request.log.warn({ err: error }, 'could not record the Idempotency-Key outcome');
      if (attached !== undefined) {
        // The answer, whatever its status, tells of work whose record (an audit row, a minted token)
        // was not written: it must not go out. The key is freed, as for any failed request, so the
        // agent's retry runs again. Answered as the handler's own failure to write the record would
        // be (a database outage: 503).
        if (succeeded) await deps.store.release(claim.agentId, claim.key, claim.createdAt).catch(() => undefined);
        throw error;
      }
    }
    return payload;
  }

  /**
   * Hands `attached` to this request's key, to be written with its outcome in one statement (see
   * `IdempotencyStore`). false when the request holds no key: the caller writes them itself.
   */
  function attach(request: FastifyRequest, attached: Attached): boolean {
    const claimed = claims.get(request);
    if (!claimed || claimed.attached !== undefined) return false;
    claimed.attached = attached;
    return true;
  }

  return {
    preHandler,
    onSend,
    attach,
    /** Forgets keys past their 24 hours; call it from a periodic sweep. */
    sweep: () => deps.store.deleteExpired(deps.clock()),
  };
}

export type Idempotency<Attached = never> = ReturnType<typeof createIdempotency<Attached>>;

export interface RouteIdentity {
  method: string | string[];
  /** The route's pattern, e.g. `/v1/proposals/:id/commit`. */
  url: string;
}

/**
 * Adds the Idempotency-Key hooks to every route of `app`, in any plugin, registered before or after
 * this call, for which `applies` is true. The only way they are registered: a route that added them
 * itself as well would claim its key twice. They are `preHandler` hooks: every plugin's `onRequest`
 * (authentication) has run by then, so the key is looked up for a known agent.
 */
export function applyIdempotency<Attached>(app: FastifyInstance, idempotency: Idempotency<Attached>, applies: (route: RouteIdentity) => boolean): void {
  app.addHook('preHandler', async (request, reply) => {
    if (!applies({ method: request.method, url: request.routeOptions.url ?? '' })) return undefined;
    return idempotency.preHandler(request, reply);
  });
  // Acts only on requests whose preHandler took a key.
  app.addHook('onSend', async (request, reply, payload) => idempotency.onSend(request, reply, payload));
}

/** The routes docs/api.md (Idempotency) gives an Idempotency-Key: every POST of /v1, and /agp/execute. */
export function isIdempotentRoute(route: RouteIdentity): boolean {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  return methods.includes('POST') && (route.url.startsWith('/v1/') || route.url === '/agp/execute');
}
