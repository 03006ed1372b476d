/**
 * twokey's TypeScript SDK, for both dialects: the AGP Execute Handoff calls (`prepare`, `execute`,
 * sending `X-Confirmation-Token` and `Idempotency-Key` exactly as the AGP SDK does) and the native
 * two-key API (`propose`, `get`, `wait`, `commit`, `cancel`).
 *
 * Self-contained on purpose: no dependency but the platform's `fetch`, and nothing imported from the
 * server, so it can be copied or published on its own.
 */

export interface TwokeyOptions {
  /** Where twokey listens, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** The agent's key, `tk_agent_…`. */
  apiKey: string;
  /** Another fetch (a proxy agent, a test double); the global one by default. */
  fetch?: typeof fetch;
}

export interface ErrorDetail {
  path: string;
  message: string;
}

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

export interface AgpEnvelope<T = unknown> {
  transactionId: string;
  operation: 'discover' | 'query' | 'execute';
  businessId: string;
  status: 'succeeded';
  /** What the business answered; for execute, `{ status: 'succeeded' | 'pending_confirmation' | 'completed' | 'error' | 'failed', … }`. */
  data: T;
}

export interface PrepareResponse {
  confirmationToken: string;
  expiresAt: string;
  summary: string;
  businessId: string;
  /** Set when a human must approve first: follow it with `wait(proposalId)`. */
  proposalId?: string;
  approval?: { status: 'pending'; quorum: number };
}

export interface ExecuteOptions {
  /** Sent as `X-Confirmation-Token`. */
  confirmationToken?: string;
  /** Sent as `Idempotency-Key`: a retry with the same key gets the first answer back. */
  idempotencyKey?: string;
}

// --- native API ------------------------------------------------------------------------------------

export type ProposalStatus = 'pending' | 'approved' | 'executing' | 'committed' | 'rejected' | 'expired' | 'cancelled';

export interface ProposalView {
  id: string;
  status: ProposalStatus;
  operation: string;
  params: Record<string, unknown>;
  summary: string;
  expiresAt: string;
  quorum: number;
  approvals: Array<{ approver: string; at: string }>;
  decision: { by: string; at: string; reason: string | null } | null;
  result: unknown;
  error: string | null;
}

export interface ProposalCreated {
  id: string;
  status: 'pending';
  operation: string;
  summary: string;
  expiresAt: string;
  /** Returned once; needed to commit `commit: agent` operations. */
  confirmToken: string;
  quorum: number;
  approvals: [];
}

export interface OperationInfo {
  name: string;
  description: string;
  confirmationType: 'payment' | 'approval' | 'verification';
  params: Record<string, unknown>;
  quorum: number;
  commit: 'on_approve' | 'agent';
  expiresInSeconds: number;
}

export interface ProposeInput {
  operation: string;
  params: Record<string, unknown>;
  callbackUrl?: string;
}

export interface CommitClaim {
  operation: string;
  params: Record<string, unknown>;
}

export interface WaitOptions {
  /** Give up after this long and return the latest view; default 5 minutes. */
  timeoutMs?: number;
  /** What to wait for; default: a decision (the status is no longer `pending`). */
  until?: (view: ProposalView) => boolean;
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

  constructor(options: TwokeyOptions) {
    this.baseUrl = options.baseUrl.trim().replace(/\/+$/, '');
    if (!/^https?:\/\//.test(this.baseUrl)) throw new TypeError('Twokey needs a baseUrl such as http://127.0.0.1:8080');
    if (!options.apiKey) throw new TypeError('Twokey needs the agent API key (tk_agent_…)');
    this.apiKey = options.apiKey;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
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

  /** The proposal now; with `waitSeconds` (at most 60), the server holds the answer until it changes. */
  get(id: string, options: { waitSeconds?: number } = {}): Promise<ProposalView> {
    // Tenths of a second, so a short remaining wait is not rounded up to a whole one.
    const seconds = options.waitSeconds ? Math.max(0.1, Math.min(MAX_WAIT_SECONDS, Math.ceil(options.waitSeconds * 10) / 10)) : 0;
    const wait = seconds ? `?wait=${seconds}` : '';
    return this.call('GET', `/v1/proposals/${encodeURIComponent(id)}${wait}`);
  }

  /** Long-polls until `until` holds (by default: a human decided) or the timeout; returns the latest view. */
  async wait(id: string, options: WaitOptions = {}): Promise<ProposalView> {
    const until = options.until ?? ((view: ProposalView) => view.status !== 'pending');
    const deadline = Date.now() + (options.timeoutMs ?? 5 * 60_000);
    let view = await this.get(id);
    while (!until(view) && !FINAL.includes(view.status)) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      view = await this.get(id, { waitSeconds: Math.min(MAX_WAIT_SECONDS, remaining / 1000) });
    }
    return view;
  }

  /** Runs an approved `commit: agent` proposal; the token goes in `X-Confirmation-Token`. */
  commit(id: string, claim: CommitClaim, options: { confirmToken: string; idempotencyKey?: string }): Promise<{ status: 'committed'; result: unknown }> {
    const headers: Record<string, string> = { 'x-confirmation-token': options.confirmToken };
    if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
    return this.call('POST', `/v1/proposals/${encodeURIComponent(id)}/commit`, claim, headers);
  }

  cancel(id: string, options: { idempotencyKey?: string } = {}): Promise<ProposalView> {
    return this.call('POST', `/v1/proposals/${encodeURIComponent(id)}/cancel`, undefined, options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {});
  }

  private async call<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.baseUrl}${path}`, {
        method,
        headers: {
          accept: 'application/json',
          authorization: `Bearer ${this.apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      throw new TwokeyApiError(0, 'network_error', `could not reach twokey at ${this.baseUrl}: ${error instanceof Error ? error.message : String(error)}`, null);
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
