import type { AgenrExecutePolicy } from '../config/env.js';
import { canonicalJson, digestsEqual, sha256Hex } from '../core/secrets.js';
import { agpRefusal } from './messages.js';

/**
 * The gateway-level confirmation rules of the AGP dialect. Everything here is pure and takes the
 * clock as an argument, so the tests pin exact boundaries.
 */
export type ExecutePolicy = AgenrExecutePolicy;

export interface GatewayPolicy {
  mode: ExecutePolicy;
  /** AGENR_MAX_EXECUTE_AMOUNT, in cents; only `strict` reads it. */
  maxAmountCents: number;
}

/** AGP's token lifetime: 5 minutes, from the specification. */
export const GATEWAY_TOKEN_TTL_MS = 5 * 60_000;

/**
 * A business whose executions need a human's approval can never be executed without a token, even
 * when the gateway is `open`: otherwise an agent could skip the approval by not preparing at all.
 */
export function effectivePolicy(gateway: ExecutePolicy, requiresApproval: boolean): ExecutePolicy {
  return requiresApproval && gateway === 'open' ? 'confirm' : gateway;
}

/** SHA-256 of the RFC 8785 form of the request, so key order and whitespace never matter. */
export function requestHash(request: Record<string, unknown>): string {
  return sha256Hex(canonicalJson(request));
}

export type RequestedAmount = { kind: 'none' } | { kind: 'cents'; cents: number } | { kind: 'invalid' };

function readNumber(value: unknown): number | null | 'invalid' {
  if (value === undefined || value === null) return null;
  if (typeof value === 'number') return Number.isFinite(value) ? value : 'invalid';
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return 'invalid';
}

/**
 * The amount `strict` checks: `amount_cents` or `amount`, both read as cents as the specification
 * says. Stricter than the reference gateway on purpose: when both are present the larger counts (an
 * adapter may charge either), and a value that is not a number is refused rather than ignored.
 */
export function requestedAmount(request: Record<string, unknown>): RequestedAmount {
  const values = [readNumber(request['amount_cents']), readNumber(request['amount'])];
  if (values.includes('invalid')) return { kind: 'invalid' };
  const present = values.filter((value): value is number => typeof value === 'number');
  if (present.length === 0) return { kind: 'none' };
  return { kind: 'cents', cents: Math.max(...present) };
}

/** Throws the 403 of `strict` when the request asks for more than the ceiling; the ceiling itself passes. */
export function checkAmountCeiling(request: Record<string, unknown>, maxAmountCents: number): void {
  const amount = requestedAmount(request);
  if (amount.kind === 'invalid') throw agpRefusal.amountNotNumber();
  if (amount.kind === 'cents' && amount.cents > maxAmountCents) throw agpRefusal.amountExceeds(maxAmountCents);
}

/** The reference gateway's summary text, so agents that show it to their user read the same thing. */
export function describeExecuteRequest(businessId: string, request: Record<string, unknown>): string {
  const amount = requestedAmount(request);
  const base = `Execute request for business '${businessId}'`;
  return amount.kind === 'cents' ? `${base} (requested amount: ${amount.cents} cents)` : base;
}

export interface TokenBinding {
  agentId: string;
  businessId: string;
  requestHash: string;
  expiresAt: Date;
  consumedAt: Date | null;
}

export interface ExecuteClaim {
  agentId: string;
  businessId: string;
  requestHash: string;
}

/**
 * The checks a gateway token passes before an execute may run. The principal comes first so that
 * another agent holding a leaked token learns nothing about its state. A token is valid for
 * [issued, expiresAt): at `expiresAt` exactly it has expired.
 */
export function verifyGatewayToken(token: TokenBinding | null, claim: ExecuteClaim, now: Date): void {
  if (!token) throw agpRefusal.invalidToken();
  if (token.agentId !== claim.agentId) throw agpRefusal.otherPrincipal();
  if (token.consumedAt) throw agpRefusal.consumed();
  if (now.getTime() >= token.expiresAt.getTime()) throw agpRefusal.expired();
  if (token.businessId !== claim.businessId || !digestsEqual(token.requestHash, claim.requestHash)) {
    throw agpRefusal.mismatch();
  }
}
