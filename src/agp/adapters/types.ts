/**
 * What a business adapter is: the AGP specification's `discover`, `query` and
 * `execute(params, options, ctx)`. Adapters never see the agent's key or the business's
 * credentials: `ctx.fetch` adds the credentials on the way out.
 */

import type { ConfirmationType } from '../../core/model.js';

export type { ConfirmationType } from '../../core/model.js';

/** Read-only or free actions that need no human. */
export interface SucceededResult {
  status: 'succeeded';
  data?: unknown;
  [field: string]: unknown;
}

/** The adapter asks for a human: a hosted page (`confirmationUrl`), its own token, or both. */
export interface PendingConfirmationResult {
  status: 'pending_confirmation';
  confirmationToken?: string;
  confirmationUrl?: string;
  confirmationType?: ConfirmationType;
  summary?: unknown;
  message?: string;
  expiresAt?: string;
  expiresIn?: string;
  [field: string]: unknown;
}

export interface CompletedResult {
  status: 'completed';
  [field: string]: unknown;
}

/**
 * A refusal by the business (closed, out of stock, bad token). `failed` is the Echo adapter's spelling
 * in the reference implementation; `error` is the specification's.
 */
export interface ErrorResult {
  status: 'error' | 'failed';
  message?: string;
  error?: string;
  [field: string]: unknown;
}

export type ExecuteResult = SucceededResult | PendingConfirmationResult | CompletedResult | ErrorResult;

export interface ExecuteOptions {
  /**
   * Stable across retries of one execution: the proposal id, else derived from the gateway token
   * alone, else (only under `open`, which has no token) from the agent's Idempotency-Key. A business
   * that honours it never charges twice.
   */
  idempotencyKey: string;
}

/** A single-use token an adapter mints for its own two-step confirmation (Echo's order token). */
export interface AdapterTokenIssue {
  token: string;
  expiresAt: Date;
}

export type AdapterTokenRedemption =
  { ok: true; data: Record<string, unknown> | null } | { ok: false; reason: 'invalid' | 'consumed' | 'expired' | 'mismatch' };

export interface AdapterTokens {
  /** Mints a token bound to this agent, this business and `binding` (hashed canonically). */
  mint(binding: unknown, options: { ttlMs: number; data?: Record<string, unknown> }): Promise<AdapterTokenIssue>;
  /**
   * Redeems a token once: valid only for the agent and business it was minted for, with the same
   * binding, before expiry. `record` is stored with the consumption, in the same statement.
   */
  redeem(token: string, binding: unknown, record: Record<string, unknown>): Promise<AdapterTokenRedemption>;
}

export interface AdapterContext {
  businessId: string;
  /** The twokey agent id (never its key): adapters that keep per-caller state key it by this. */
  agentId: string;
  /** This call's transaction id (`txn_…`) or, under chat approval, the proposal id. */
  transactionId: string;
  clock: () => Date;
  /** Aborted when the business's timeout elapses. */
  signal: AbortSignal;
  /**
   * `fetch` that adds the business's configured credentials, and only towards the origins they are
   * meant for, so a URL taken from a request cannot carry them elsewhere.
   */
  fetch(url: string | URL, init?: RequestInit): Promise<Response>;
  tokens: AdapterTokens;
}

export interface Adapter {
  discover(ctx: AdapterContext): Promise<unknown>;
  query(request: Record<string, unknown>, ctx: AdapterContext): Promise<unknown>;
  execute(params: Record<string, unknown>, options: ExecuteOptions, ctx: AdapterContext): Promise<ExecuteResult>;
}
