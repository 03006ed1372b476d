import type { AgenrExecutePolicy } from '../config/env.js';
import { canonicalJson, digestsEqual, sha256Hex } from '../core/secrets.js';
import { failedHolderCheck, failedTokenCheck } from '../core/token-checks.js';
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

export type RequestedAmount = { kind: 'none' } | { kind: 'cents'; cents: number; path: string } | { kind: 'invalid'; path: string };

/**
 * Words that name an amount when they end a key (`amount`, `order_total`, `unitPrice`, `amountCents`,
 * `total-cents`); amounts are always read as cents, as the specification says.
 */
const AMOUNT_WORDS = new Set(['amount', 'total', 'subtotal', 'price', 'cost', 'charge', 'fee']);

export function namesAnAmount(key: string): boolean {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word.toLowerCase());
  if (words.at(-1) === 'cents') words.pop();
  return AMOUNT_WORDS.has(words.at(-1) ?? '');
}

const pointerSegment = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** RFC 6901: the value at `pointer`, or undefined when any step is missing. */
export function valueAt(document: unknown, pointer: string): unknown {
  if (pointer === '') return document;
  let current = document;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

interface FoundAmount {
  path: string;
  value: unknown;
}

/** Every value held under a key that names an amount; an amount key holding an object is looked into. */
function amountsByName(value: unknown, path: string, found: FoundAmount[]): void {
  if (typeof value !== 'object' || value === null) return;
  const entries = Array.isArray(value) ? value.map((item, index) => [String(index), item] as const) : Object.entries(value);
  for (const [key, item] of entries) {
    const itemPath = `${path}/${pointerSegment(key)}`;
    if (!Array.isArray(value) && namesAnAmount(key) && (typeof item !== 'object' || item === null)) {
      found.push({ path: itemPath, value: item });
      continue;
    }
    const before = found.length;
    amountsByName(item, itemPath, found);
    // `"amount_cents": {"value": 1}` must not hide an amount from the check.
    if (!Array.isArray(value) && namesAnAmount(key) && found.length === before) found.push({ path: itemPath, value: item });
  }
}

/** Cents, or 'invalid' unless a non-negative integer (a numeric string counts, as agents send them). */
function readCents(value: unknown): number | null | 'invalid' {
  if (value === undefined || value === null) return null;
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(value) ? Number(value) : Number.NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : 'invalid';
}

/**
 * The amount `strict` checks, in cents. With `declared` (the business's `amounts:` JSON pointers)
 * only those places are read; without, every value under a key that names an amount, at any depth.
 * Each must be a non-negative integer; the largest one counts (an adapter may charge any of them).
 */
export function requestedAmount(request: Record<string, unknown>, declared: readonly string[] | null = null): RequestedAmount {
  const found: FoundAmount[] = [];
  if (declared) for (const pointer of declared) found.push({ path: pointer, value: valueAt(request, pointer) });
  else amountsByName(request, '', found);
  let largest: { cents: number; path: string } | null = null;
  for (const { path, value } of found) {
    const cents = readCents(value);
    if (cents === 'invalid') return { kind: 'invalid', path };
    if (cents !== null && (largest === null || cents > largest.cents)) largest = { cents, path };
  }
  return largest ? { kind: 'cents', ...largest } : { kind: 'none' };
}

/** Throws the 403 of `strict` when an amount is not a non-negative integer or is above the ceiling; the ceiling itself passes. */
export function checkAmountCeiling(request: Record<string, unknown>, maxAmountCents: number, declared: readonly string[] | null = null): void {
  const amount = requestedAmount(request, declared);
  if (amount.kind === 'invalid') throw agpRefusal.amountNotNumber(amount.path);
  if (amount.kind === 'cents' && amount.cents > maxAmountCents) throw agpRefusal.amountExceeds(maxAmountCents);
}

/** The reference gateway's summary text, so agents that show it to their user read the same thing. */
export function describeExecuteRequest(businessId: string, request: Record<string, unknown>, declared: readonly string[] | null = null): string {
  const amount = requestedAmount(request, declared);
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

/** The first two checks of every token (src/core/token-checks.ts): it exists, and it is this agent's. */
export function verifyTokenHolder(token: TokenBinding | null, claim: ExecuteClaim): asserts token is TokenBinding {
  const failed = failedHolderCheck(token, (held) => held.agentId === claim.agentId);
  if (failed === 'invalid_token') throw agpRefusal.invalidToken();
  if (failed === 'principal_mismatch') throw agpRefusal.otherPrincipal();
}

/** The token was issued for exactly this business and request. */
export const bindsTheRequest = (token: TokenBinding, claim: ExecuteClaim): boolean =>
  token.businessId === claim.businessId && digestsEqual(token.requestHash, claim.requestHash);

/**
 * The checks a gateway token passes before an execute may run, in the order every token is checked
 * (src/core/token-checks.ts): the principal first, so that another agent holding a leaked token
 * learns nothing about its state; at `expiresAt` exactly it has expired.
 */
export function verifyGatewayToken(token: TokenBinding | null, claim: ExecuteClaim, now: Date): void {
  const failed = failedTokenCheck(
    token,
    { heldByCaller: (held) => held.agentId === claim.agentId, bindingMismatch: (held) => (bindsTheRequest(held, claim) ? null : 'mismatch') },
    now,
  );
  switch (failed) {
    case null:
      return;
    case 'invalid_token':
      throw agpRefusal.invalidToken();
    case 'principal_mismatch':
      throw agpRefusal.otherPrincipal();
    case 'consumed':
      throw agpRefusal.consumed();
    case 'expired':
      throw agpRefusal.expired();
    case 'mismatch':
      throw agpRefusal.mismatch();
  }
}
