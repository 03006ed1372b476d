/**
 * twokey's TypeScript SDK, for both dialects: the AGP Execute Handoff calls (`prepare`, `execute`,
 * sending `X-Confirmation-Token` and `Idempotency-Key` exactly as the AGP SDK does) and the native
 * two-key API (`propose`, `get`, `wait`, `commit`, `cancel`).
 *
 * Self-contained on purpose: no dependency but the platform's `fetch`, and nothing imported from the
 * server, so it can be copied or published on its own. The request and answer types come from
 * `api-types.ts`, generated from docs/openapi.json (`npm run openapi`); it holds types only.
 */

import type { components, paths } from './api-types.js';

type Schemas = components['schemas'];
type JsonBody<T> = T extends { requestBody: { content: { 'application/json': infer B } } } ? B : never;

export interface TwokeyOptions {
  /** Where twokey listens, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The agent's key, `tk_agent_…`. */
  apiKey: string;
  /** Another fetch (a proxy agent, a test double); the global one by default. */
  fetch?: typeof fetch;
  /**
   * Headers for every request, asked for anew each time. Made for trace context: with OpenTelemetry,
   * `() => { const carrier = {}; propagation.inject(context.active(), carrier); return carrier; }`
   * sends the current span's `traceparent`, and twokey's spans join the agent's trace. They cannot
   * replace the key or the headers a call sets itself.
   */
  headers?: () => Record<string, string>;
}

export type ErrorDetail = Schemas['ErrorDetail'];

/** Any answer that is not 2xx, with the server's code (`expired`, `not_approved`, …) and request id. */
export class TwokeyApiError extends Error {
  override readonly name = 'TwokeyApiError';

  constructor(
    /** HTTP status; 0 when the server could not be reached. */
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
    readonly details: ErrorDetail[] = [],
    /** The parsed response body, for anything the fields above do not cover. */
    readonly body: unknown = null,
  ) {
    super(message);
  }
}

// --- AGP -------------------------------------------------------------------------------------------

export type AgpRequest = Record<string, unknown>;

export interface AgpEnvelope<T = unknown> extends Omit<Schemas['AgpEnvelope'], 'data'> {
  /** What the business answered; for execute, `{ status: 'succeeded' | 'pending_confirmation' | 'completed' | 'error' | 'failed', … }`. */
  data: T;
}

/** With `proposalId` when a human must approve first: follow it with `wait(proposalId)`. */
export type PrepareResponse = Schemas['AgpPrepareAnswer'];

export interface ExecuteOptions {
  /** Sent as `X-Confirmation-Token`. */
  confirmationToken?: string;
  /** Sent as `Idempotency-Key`: a retry with the same key gets the first answer back. */
  idempotencyKey?: string;
}

// --- native API ------------------------------------------------------------------------------------

/** The one answer about a decision: read `outcome`, `userConsent` and `retryable`, not the status. */
export type Outcome = Schemas['Outcome'];

export { outcomeText } from './outcome.js';

/** A proposal as its agent sees it (never the token), with its `outcome`. */
export type ProposalView = Schemas['ProposalView'];

export type ProposalStatus = ProposalView['status'];

/** The 201 of `propose`: `confirmToken` is returned this once; needed to commit `commit: agent` operations. */
export type ProposalCreated = Schemas['ProposalCreated'];

/**
 * The 200 of `proposeOnce` when a request with the same identity still answers: the proposal as it is
 * now, and its token when it was created with this same API key (else null).
 */
export type ProposalReused = Schemas['ProposalReused'];

export type CommitAnswer = Schemas['CommitAnswer'];

export type OperationInfo = Schemas['OperationInfo'];

export type ProposeInput = JsonBody<paths['/v1/proposals']['post']>;

/** What identifies a call besides its agent, operation and canonical params: the framework's conversation, thread or run. */
export type ProposeOnceInput = Omit<ProposeInput, 'reuse'>;

export type CommitClaim = JsonBody<paths['/v1/proposals/{id}/commit']['post']>;

export interface WaitOptions {
  /** Give up after this long and return the latest view; default 5 minutes. */
  timeoutMs?: number;
  /** What to wait for; default: a decision (the status is no longer `pending`). */
  until?: (view: ProposalView) => boolean;
  /** Stops waiting (the proposal stays as it is). */
  signal?: AbortSignal;
}

const MAX_WAIT_SECONDS = 60;
const FINAL: readonly ProposalStatus[] = ['committed', 'rejected', 'expired', 'cancelled'];

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function toApiError(status: number, body: unknown): TwokeyApiError {
  if (isRecord(body) && isRecord(body['error'])) {
    const error = body['error'];
    const details = Array.isArray(error['details']) ? (error['details'] as ErrorDetail[]) : [];
    return new TwokeyApiError(
      status,
      typeof error['code'] === 'string' ? error['code'] : `http_${status}`,
      typeof error['message'] === 'string' ? error['message'] : `HTTP ${status}`,
      typeof error['requestId'] === 'string' ? error['requestId'] : null,
      details,
      body,
    );
  }
  // An AGP reference gateway in front: `{ error: "text", code?, message?, requestId? }`.
  if (isRecord(body) && typeof body['error'] === 'string') {
    return new TwokeyApiError(
      status,
      typeof body['code'] === 'string' ? body['code'] : `http_${status}`,
      body['error'],
      typeof body['requestId'] === 'string' ? body['requestId'] : null,
      [],
      body,
    );
  }
  return new TwokeyApiError(status, `http_${status}`, `HTTP ${status}`, null, [], body);
}

export class Twokey {
  private readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly fetchImpl: typeof fetch;
  private readonly headersOfCaller: () => Record<string, string>;

  constructor(options: TwokeyOptions) {
    this.baseUrl = options.baseUrl.trim().replace(/\/+$/, '');
    if (!/^https?:\/\//.test(this.baseUrl)) throw new TypeError('Twokey needs a baseUrl such as http://127.0.0.1:8080');
    if (!options.apiKey) throw new TypeError('Twokey needs the agent API key (tk_agent_…)');
    this.apiKey = options.apiKey;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.headersOfCaller = options.headers ?? (() => ({}));
  }

  // --- AGP ---

  discover<T = unknown>(businessId: string): Promise<AgpEnvelope<T>> {
    return this.call('POST', '/agp/discover', { businessId });
  }

  query<T = unknown>(businessId: string, request: AgpRequest): Promise<AgpEnvelope<T>> {
    return this.call('POST', '/agp/query', { businessId, request });
  }

  /** Step 1 of the handoff: a single-use token for exactly this request, valid 5 minutes. */
  prepare(businessId: string, request: AgpRequest): Promise<PrepareResponse> {
    return this.call('POST', '/agp/execute/prepare', { businessId, request });
  }

  /** Step 2: the same `request`, with the token; the request must not change by a byte of meaning. */
  execute<T = unknown>(businessId: string, request: AgpRequest, options: ExecuteOptions = {}): Promise<AgpEnvelope<T>> {
    const headers: Record<string, string> = {};
    if (options.confirmationToken) headers['x-confirmation-token'] = options.confirmationToken;
    if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
    return this.call('POST', '/agp/execute', { businessId, request }, headers);
  }

  // --- native API ---

  async operations(): Promise<OperationInfo[]> {
    const answer = await this.call<{ operations: OperationInfo[] }>('GET', '/v1/operations');
    return answer.operations;
  }

  propose(input: ProposeInput, options: { idempotencyKey?: string } = {}): Promise<ProposalCreated> {
    return this.call('POST', '/v1/proposals', input, options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {});
  }

  /**
   * Proposes with `reuse: true`: while a request with the same identity (this agent, the operation,
   * the canonical params, the `conversation`) is open, or decided and not yet seen, twokey answers
   * with that request (`reused: true`) instead of asking a human again. What a tool call that may be
   * repeated ("call again with the same arguments") should use; see docs/api.md, "One request per call".
   */
  proposeOnce(input: ProposeOnceInput, options: { idempotencyKey?: string } = {}): Promise<ProposalCreated | ProposalReused> {
    const body: ProposeInput = { ...input, reuse: true };
    return this.call('POST', '/v1/proposals', body, options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {});
  }

  /**
   * The proposal now; with `waitSeconds` (at most 60), the server holds the answer until it changes
   * from `seen` (a view this client already has), or from what the server first reads.
   */
  get(id: string, options: { waitSeconds?: number; seen?: ProposalView; signal?: AbortSignal } = {}): Promise<ProposalView> {
    // Tenths of a second, so a short remaining wait is not rounded up to a whole one.
    const seconds = options.waitSeconds ? Math.max(0.1, Math.min(MAX_WAIT_SECONDS, Math.ceil(options.waitSeconds * 10) / 10)) : 0;
    const query = new URLSearchParams();
    if (seconds) query.set('wait', String(seconds));
    if (seconds && options.seen) query.set('seen', `${options.seen.status}:${options.seen.approvals.length}`);
    const search = query.size ? `?${query.toString()}` : '';
    return this.call('GET', `/v1/proposals/${encodeURIComponent(id)}${search}`, undefined, {}, options.signal);
  }

  /** Long-polls until `until` holds (by default: a human decided) or the timeout; returns the latest view. */
  async wait(id: string, options: WaitOptions = {}): Promise<ProposalView> {
    const until = options.until ?? ((view: ProposalView) => view.status !== 'pending');
    const deadline = Date.now() + (options.timeoutMs ?? 5 * 60_000);
    const signal = options.signal;
    let view = await this.get(id, signal ? { signal } : {});
    while (!until(view) && !FINAL.includes(view.status)) {
      const remaining = deadline - Date.now();
      if (remaining <= 0 || signal?.aborted) break;
      // `seen`: the server answers as soon as the proposal differs from this view, and holds it while
      // it does not, so no change between two calls is missed and an unchanged one is not re-asked.
      view = await this.get(id, { waitSeconds: Math.min(MAX_WAIT_SECONDS, remaining / 1000), seen: view, ...(signal ? { signal } : {}) });
    }
    return view;
  }

  /**
   * Runs an approved `commit: agent` proposal; the token goes in `X-Confirmation-Token`. Sent again
   * after it happened (the answer was lost), it resolves with the stored result and `replayed: true`.
   */
  commit(id: string, claim: CommitClaim, options: { confirmToken: string; idempotencyKey?: string }): Promise<CommitAnswer> {
    const headers: Record<string, string> = { 'x-confirmation-token': options.confirmToken };
    if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
    return this.call('POST', `/v1/proposals/${encodeURIComponent(id)}/commit`, claim, headers);
  }

  cancel(id: string, options: { idempotencyKey?: string } = {}): Promise<ProposalView> {
    return this.call(
      'POST',
      `/v1/proposals/${encodeURIComponent(id)}/cancel`,
      undefined,
      options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {},
    );
  }

  /** Parks what the agent needs to resume a paused run beside its proposal (sealed under this API key). */
  async putResumeState(id: string, state: string): Promise<void> {
    await this.call('PUT', `/v1/proposals/${encodeURIComponent(id)}/resume-state`, { state });
  }

  /** Reads back what `putResumeState` parked, from any process holding the same API key. */
  async getResumeState(id: string): Promise<string> {
    const answer = await this.call<Schemas['ResumeState']>('GET', `/v1/proposals/${encodeURIComponent(id)}/resume-state`);
    return answer.state;
  }

  private async call<T>(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<T> {
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.baseUrl}${path}`, {
        method,
        headers: {
          ...this.headersOfCaller(),
          accept: 'application/json',
          authorization: `Bearer ${this.apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      throw new TwokeyApiError(
        0,
        'network_error',
        `could not reach twokey at ${this.baseUrl}: ${error instanceof Error ? error.message : String(error)}`,
        null,
      );
    }
    const text = await response.text();
    let parsed: unknown = null;
    if (text !== '') {
      try {
        parsed = JSON.parse(text) as unknown;
      } catch {
        if (response.ok) throw new TwokeyApiError(response.status, 'invalid_response', 'twokey answered with a body that is not JSON', null, [], text);
      }
    }
    if (!response.ok) throw toApiError(response.status, parsed);
    return parsed as T;
  }
}
