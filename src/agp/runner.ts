import { TwokeyError } from '../core/errors.js';
import type { Clock } from '../core/model.js';
import { canonicalJson, mintConfirmToken, sha256Hex } from '../core/secrets.js';
import type { AdapterContext, AdapterTokenRedemption, AdapterTokens } from './adapters/types.js';
import type { BusinessDefinition } from './businesses.js';
import type { AgpTokenRecord, AgpTokenStore } from './ports.js';
import { injectTrace } from '../tracing/index.js';

/**
 * Runs one adapter call: builds its context (credentialed fetch, adapter tokens, timeout) and turns
 * any failure into a message that is safe to show the agent.
 */

export interface AdapterRunnerDeps {
  tokens: AgpTokenStore;
  clock: Clock;
  /** The network; tests inject a fake. */
  fetch?: typeof fetch;
}

export interface RunScope {
  business: BusinessDefinition;
  agentId: string;
  transactionId: string;
}

const bindingHash = (binding: unknown): string => sha256Hex(canonicalJson(binding ?? null));

/**
 * Adds the business's credentials only on requests to its own origins, and then refuses to follow
 * redirects: fetch would carry custom headers (an `X-Api-Key`) along to wherever a redirect points.
 */
export function credentialedFetch(business: BusinessDefinition, signal: AbortSignal, fetchImpl: typeof fetch) {
  return (url: string | URL, init: RequestInit = {}): Promise<Response> => {
    const target = new URL(url);
    const headers = new Headers(init.headers);
    // The business's service joins the trace of the execute span (a no-op without an SDK).
    injectTrace(headers);
    const withCredentials = business.credentials.origins.includes(target.origin) && Object.keys(business.credentials.headers).length > 0;
    if (withCredentials) for (const [name, value] of Object.entries(business.credentials.headers)) headers.set(name, value);
    const signals = init.signal ? [init.signal, signal] : [signal];
    return fetchImpl(target, {
      ...init,
      headers,
      signal: AbortSignal.any(signals),
      ...(withCredentials ? { redirect: 'manual' as const } : {}),
    });
  };
}

class AdapterTokenRefusal extends Error {
  constructor(readonly reason: Exclude<AdapterTokenRedemption, { ok: true }>['reason']) {
    super(reason);
  }
}

/**
 * Where the tokens an adapter mints during one run go when the caller writes them itself, with its
 * own row, in one statement (`open` execute: with its audit row). The caller must write them before
 * it answers: until then the token is nowhere, and an answer carrying it would carry a dead token.
 */
export interface MintedTokens {
  records: AgpTokenRecord[];
}

function adapterTokens(store: AgpTokenStore, clock: Clock, scope: RunScope, minted: MintedTokens | undefined): AdapterTokens {
  /** A token is redeemed only once it is stored, even one minted earlier in the same run. */
  async function storeMinted(): Promise<void> {
    if (!minted || minted.records.length === 0) return;
    const records = minted.records.splice(0);
    for (const record of records) await store.insert(record);
  }
  return {
    async mint(binding, options) {
      const token = mintConfirmToken();
      const now = clock();
      const expiresAt = new Date(now.getTime() + options.ttlMs);
      const record: AgpTokenRecord = {
        tokenHash: sha256Hex(token),
        kind: 'adapter',
        agentId: scope.agentId,
        businessId: scope.business.id,
        requestHash: bindingHash(binding),
        proposalId: null,
        data: { transactionId: scope.transactionId, ...options.data },
        createdAt: now,
        expiresAt,
        consumedAt: null,
      };
      if (minted) minted.records.push(record);
      else await store.insert(record);
      return { token, expiresAt };
    },

    async redeem(token, binding, record) {
      await storeMinted();
      const now = clock();
      const verify = (row: AgpTokenRecord | null) => {
        // Another agent's or another business's token is "invalid" to this caller: it learns nothing about it.
        if (!row || row.agentId !== scope.agentId || row.businessId !== scope.business.id) throw new AdapterTokenRefusal('invalid');
        if (row.consumedAt) throw new AdapterTokenRefusal('consumed');
        if (now.getTime() >= row.expiresAt.getTime()) throw new AdapterTokenRefusal('expired');
        if (row.requestHash !== bindingHash(binding)) throw new AdapterTokenRefusal('mismatch');
      };
      try {
        const consumed = await store.consume(sha256Hex(token), 'adapter', now, verify, { data: { ...record, redeemedBy: scope.transactionId } });
        return { ok: true, data: consumed.data };
      } catch (error) {
        if (error instanceof AdapterTokenRefusal) return { ok: false, reason: error.reason };
        throw error;
      }
    },
  };
}

/** What the agent may read about a failed call: the business and the kind of failure, nothing it sent or received. */
function describeFailure(business: BusinessDefinition, error: unknown, timedOut: boolean): string {
  if (timedOut) return `business '${business.id}' did not answer within ${business.timeoutMs} ms`;
  if (error instanceof Error && error.name === 'BusinessCallError') return error.message;
  if (error instanceof TypeError && error.message === 'fetch failed') return `business '${business.id}' could not be reached`;
  return `business '${business.id}' failed`;
}

export function createAdapterRunner(deps: AdapterRunnerDeps) {
  const fetchImpl = deps.fetch ?? fetch;

  /** With `minted`, the tokens the adapter mints are handed to the caller to write (see `MintedTokens`) instead of written one by one. */
  async function run<T>(scope: RunScope, work: (ctx: AdapterContext) => Promise<T>, minted?: MintedTokens): Promise<T> {
    const { business } = scope;
    // A timer of its own rather than AbortSignal.timeout, which costs several times as much per call
    // (its signal is tracked until collected), and is cleared as soon as the call settles. The
    // signal itself is made only for an adapter that reads it (echo never does).
    let controller: AbortController | undefined;
    let timedOut: DOMException | undefined;
    const signal = (): AbortSignal => {
      if (!controller) {
        controller = new AbortController();
        if (timedOut) controller.abort(timedOut);
      }
      return controller.signal;
    };
    let timer: NodeJS.Timeout | undefined;
    // An adapter that ignores its signal still cannot hold the request past the business's timeout.
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = new DOMException(`business '${business.id}' did not answer in time`, 'TimeoutError');
        controller?.abort(timedOut);
        reject(timedOut);
      }, business.timeoutMs);
      timer.unref();
    });
    const ctx: AdapterContext = {
      businessId: business.id,
      agentId: scope.agentId,
      transactionId: scope.transactionId,
      clock: deps.clock,
      get signal() {
        return signal();
      },
      fetch: (url, init) => credentialedFetch(business, signal(), fetchImpl)(url, init),
      tokens: adapterTokens(deps.tokens, deps.clock, scope, minted),
    };
    try {
      return await Promise.race([work(ctx), deadline]);
    } catch (error) {
      if (error instanceof TwokeyError) throw error;
      throw new TwokeyError('execution_failed', describeFailure(business, error, timedOut !== undefined));
    } finally {
      clearTimeout(timer);
    }
  }

  return { run };
}

export type AdapterRunner = ReturnType<typeof createAdapterRunner>;
