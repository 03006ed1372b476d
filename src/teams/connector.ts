import { DeliveryError } from '../lib/delivery-error.js';

/**
 * The Bot Connector REST API, as much of it as twokey uses: create an activity in a conversation,
 * reply to one, replace one in place. Every call carries a bot token from the app's credentials
 * (OAuth 2.0 client credentials against Entra ID), fetched once and reused until shortly before it
 * expires. Plain `fetch`: the SDK's connector client gets its tokens through MSAL, which looks its
 * authority up at Microsoft first, so it could not be pointed at a local token endpoint in tests.
 */

export interface BotConnectorOptions {
  appId: string;
  /** The client secret: sent to the token endpoint only, never logged or put in an error. */
  appPassword: string;
  /** `https://login.microsoftonline.com/<tenant>/oauth2/v2.0/token`. */
  tokenUrl: string;
  /** Milliseconds since the epoch, for the token's lifetime. */
  now: () => number;
  /** One HTTP attempt. */
  requestTimeoutMs: number;
  fetch?: typeof fetch;
}

/** The scope of tokens for the Bot Connector service. */
export const BOT_FRAMEWORK_SCOPE = 'https://api.botframework.com/.default';

/** The token endpoint of a tenant; `botframework.com` for a multi-tenant bot. */
export const tokenUrlFor = (tenantId: string | undefined): string => `https://login.microsoftonline.com/${tenantId ?? 'botframework.com'}/oauth2/v2.0/token`;

/** A token is renewed this long before it expires, so none expires on its way. */
const TOKEN_MARGIN_MS = 5 * 60_000;

type Json = Record<string, unknown>;

export interface BotConnector {
  /** POST /v3/conversations/{id}/activities: the new activity's id. */
  createActivity(serviceUrl: string, conversationId: string, activity: Json): Promise<string>;
  /** POST /v3/conversations/{id}/activities/{activityId}: a reply in the activity's thread. */
  replyToActivity(serviceUrl: string, conversationId: string, activityId: string, activity: Json): Promise<string>;
  /** PUT /v3/conversations/{id}/activities/{activityId}: the activity replaced in place. */
  updateActivity(serviceUrl: string, conversationId: string, activityId: string, activity: Json): Promise<void>;
}

const join = (serviceUrl: string, path: string): string => `${serviceUrl.replace(/\/+$/, '')}${path}`;

function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds * 1000) : undefined;
}

export function createBotConnector(options: BotConnectorOptions): BotConnector {
  const fetcher = options.fetch ?? fetch;
  let cached: { token: string; until: number } | null = null;
  let pending: Promise<string> | null = null;

  async function send(url: string, init: RequestInit, what: string): Promise<Response> {
    try {
      return await fetcher(url, { ...init, signal: AbortSignal.timeout(options.requestTimeoutMs) });
    } catch (error) {
      const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
      throw new DeliveryError(timedOut ? `${what} did not answer within ${options.requestTimeoutMs} ms` : `${what} could not be reached`);
    }
  }

  async function fetchToken(): Promise<string> {
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: options.appId,
      client_secret: options.appPassword,
      scope: BOT_FRAMEWORK_SCOPE,
    });
    const response = await send(
      options.tokenUrl,
      { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: body.toString() },
      'the token endpoint',
    );
    if (!response.ok) {
      // Entra's error body can echo the request; only the status and its error code are kept.
      const code = await response
        .json()
        .then((json: unknown) => (typeof json === 'object' && json !== null && typeof (json as Json).error === 'string' ? String((json as Json).error) : null))
        .catch(() => null);
      const detail = `the token endpoint answered ${response.status}${code ? ` (${code.slice(0, 64)})` : ''}`;
      // Wrong credentials stay wrong: no point retrying until someone fixes TEAMS_APP_ID or TEAMS_APP_PASSWORD.
      throw new DeliveryError(detail, response.status === 400 || response.status === 401 ? { permanent: true } : retryOptions(response));
    }
    const json = (await response.json().catch(() => null)) as { access_token?: unknown; expires_in?: unknown } | null;
    if (typeof json?.access_token !== 'string') throw new DeliveryError('the token endpoint answered without an access_token');
    const lifetimeMs = (typeof json.expires_in === 'number' ? json.expires_in : Number(json.expires_in ?? 3600)) * 1000;
    cached = { token: json.access_token, until: options.now() + Math.max(0, lifetimeMs - TOKEN_MARGIN_MS) };
    return json.access_token;
  }

  /** One token request at a time: clicks and edits arriving together share it. */
  async function token(): Promise<string> {
    if (cached && options.now() < cached.until) return cached.token;
    pending ??= fetchToken().finally(() => (pending = null));
    return pending;
  }

  function retryOptions(response: Response): { retryAfterMs?: number } {
    const after = retryAfterMs(response.headers.get('retry-after'));
    return after === undefined ? {} : { retryAfterMs: after };
  }

  async function call(method: 'POST' | 'PUT', url: string, activity: Json): Promise<Json> {
    const response = await send(
      url,
      { method, headers: { authorization: `Bearer ${await token()}`, 'content-type': 'application/json' }, body: JSON.stringify(activity) },
      'the Bot Connector service',
    );
    if (response.ok) return ((await response.json().catch(() => ({}))) as Json | null) ?? {};
    // A token the service no longer takes is dropped, so the outbox's retry fetches a new one.
    if (response.status === 401) cached = null;
    const detail = `the Bot Connector service answered ${response.status} to ${method} ${new URL(url).pathname}`;
    if (response.status === 429 || response.status >= 500) throw new DeliveryError(detail, retryOptions(response));
    // 400 (a card Teams refuses), 403 (the bot was removed), 404 (no such conversation): a retry cannot fix them.
    throw new DeliveryError(detail, response.status === 401 ? {} : { permanent: true });
  }

  const conversation = (id: string): string => `/v3/conversations/${encodeURIComponent(id)}/activities`;
  const idOf = (json: Json): string => {
    if (typeof json.id !== 'string' || json.id === '') throw new DeliveryError('the Bot Connector service answered without an activity id');
    return json.id;
  };

  return {
    async createActivity(serviceUrl, conversationId, activity) {
      return idOf(await call('POST', join(serviceUrl, conversation(conversationId)), activity));
    },
    async replyToActivity(serviceUrl, conversationId, activityId, activity) {
      const url = join(serviceUrl, `${conversation(conversationId)}/${encodeURIComponent(activityId)}`);
      return idOf(await call('POST', url, { ...activity, replyToId: activityId }));
    },
    async updateActivity(serviceUrl, conversationId, activityId, activity) {
      await call('PUT', join(serviceUrl, `${conversation(conversationId)}/${encodeURIComponent(activityId)}`), { ...activity, id: activityId });
    },
  };
}
