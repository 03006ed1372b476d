import { DiscordAPIError, HTTPError, RateLimitError, REST, RESTEvents } from 'discord.js';
import type { FastifyBaseLogger } from 'fastify';
import { DeliveryError } from '../lib/delivery-error.js';
import { withDeadline as deadline } from '../lib/timeouts.js';

export interface DiscordRestOptions {
  apiUrl: string;
  botToken: string;
  /**
   * A 429 asking to wait up to this long is waited out inside @discordjs/rest (its bucket handling
   * queues the request and sends it again); a longer one is thrown as a DeliveryError with
   * `retryAfterMs`, so the outbox reschedules the job instead of a worker sleeping on it.
   */
  maxRateLimitWaitMs: number;
  /** Per HTTP attempt. */
  requestTimeoutMs: number;
  logger: () => FastifyBaseLogger;
}

/**
 * One REST client for everything twokey sends to Discord: channel messages (bot token) and
 * interaction callbacks/follow-ups (`auth: false`: the interaction token in the URL authorises them).
 */
export function createDiscordRest(options: DiscordRestOptions): REST {
  const rest = new REST({
    api: options.apiUrl,
    // 5xx and network errors surface at once; the outbox owns retries, with backoff and a dead letter.
    retries: 0,
    timeout: options.requestTimeoutMs,
    rejectOnRateLimit: (limit) => limit.retryAfter > options.maxRateLimitWaitMs,
  }).setToken(options.botToken);
  rest.on(RESTEvents.RateLimited, (limit) => {
    // The route of a webhook or interaction call holds its token: log only channel routes.
    options.logger().warn(
      {
        route: limit.route.startsWith('/channels') ? limit.route : '(interaction)',
        retryAfterMs: limit.retryAfter,
        global: limit.global,
        scope: limit.scope,
      },
      'Discord rate limit: waiting before sending again',
    );
  });
  return rest;
}

/**
 * Runs one REST call with an overall deadline, bucket waits included, so a job never hangs. Aborting
 * also drops the request from @discordjs/rest's queue, so it is never sent late.
 */
export function withDeadline<T>(ms: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  return deadline(ms, work, () => new DeliveryError(`Discord did not answer within ${ms} ms`));
}

/** What a failed REST call means for the outbox. Messages carry no URL: webhook URLs hold tokens. */
export function toDeliveryError(error: unknown): DeliveryError {
  if (error instanceof DeliveryError) return error;
  if (error instanceof RateLimitError) {
    return new DeliveryError(`Discord rate limit (${error.global ? 'global' : error.scope}): retry in ${error.retryAfter} ms`, {
      retryAfterMs: error.retryAfter,
    });
  }
  if (error instanceof DiscordAPIError) {
    const said = 'message' in error.rawError ? error.rawError.message : error.rawError.error;
    const detail = `Discord answered ${error.status} (code ${String(error.code)}: ${said})`;
    // 400 (a payload Discord refuses), 401 (revoked token), 403 (missing permission), 404 (unknown
    // channel or message): sending the same request again gives the same answer.
    const permanent = [400, 401, 403, 404].includes(error.status);
    return new DeliveryError(detail, permanent ? { permanent: true } : {});
  }
  if (error instanceof HTTPError) return new DeliveryError(`Discord answered ${error.status}`);
  if (error instanceof Error && error.name === 'AbortError') return new DeliveryError('the request to Discord timed out');
  return new DeliveryError(`the request to Discord failed: ${error instanceof Error ? error.message : String(error)}`);
}

/** For log lines about interaction calls: the status and Discord's code, never the URL. */
export function describeRestFailure(error: unknown): Record<string, unknown> {
  if (error instanceof DiscordAPIError) return { status: error.status, code: error.code };
  if (error instanceof HTTPError) return { status: error.status };
  if (error instanceof RateLimitError) return { rateLimitedMs: error.retryAfter };
  if (error instanceof DeliveryError) return { error: error.message };
  return { error: error instanceof Error ? error.name : 'unknown' };
}
