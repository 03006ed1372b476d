import { describe, expect, it } from 'vitest';
import { agpMessages } from '../../src/agp/messages.js';
import {
  GATEWAY_TOKEN_TTL_MS,
  checkAmountCeiling,
  describeExecuteRequest,
  effectivePolicy,
  requestHash,
  requestedAmount,
  verifyGatewayToken,
  type TokenBinding,
} from '../../src/agp/policy.js';

const issuedAt = new Date('2026-11-22T10:00:00.000Z');
const request = { action: 'order', items: [{ productId: 'pepperoni', quantity: 2 }], amount_cents: 2998 };
const token: TokenBinding = {
  agentId: 'agt_a',
  businessId: 'joes-pizza',
  requestHash: requestHash(request),
  expiresAt: new Date(issuedAt.getTime() + GATEWAY_TOKEN_TTL_MS),
  consumedAt: null,
};
const claim = { agentId: 'agt_a', businessId: 'joes-pizza', requestHash: requestHash(request) };
const at = (seconds: number) => new Date(issuedAt.getTime() + seconds * 1000);

/** The check throws a TwokeyError with exactly this code and message. */
function expectRefusal(run: () => void, expected: { code: string; message?: string }) {
  expect(run).toThrow(expect.objectContaining({ name: 'TwokeyError', ...expected }));
}

describe('gateway token checks', () => {
  it('accepts its own token up to 299 s and refuses it from 300 s with the specification text', () => {
    expect(() => verifyGatewayToken(token, claim, at(299))).not.toThrow();
    expect(() => verifyGatewayToken(token, claim, at(299.999))).not.toThrow();
    expectRefusal(() => verifyGatewayToken(token, claim, at(300)), { code: 'expired', message: 'Confirmation token expired. Prepare a new token.' });
    expectRefusal(() => verifyGatewayToken(token, claim, at(301)), { code: 'expired', message: 'Confirmation token expired. Prepare a new token.' });
  });

  it('refuses another businessId or another request with the mismatch text', () => {
    const expected = { code: 'params_mismatch', message: 'Confirmation token does not match this execute request.' };
    expectRefusal(() => verifyGatewayToken(token, { ...claim, businessId: 'echo' }, at(1)), expected);
    const changed = requestHash({ ...request, amount_cents: 1 });
    expectRefusal(() => verifyGatewayToken(token, { ...claim, requestHash: changed }, at(1)), expected);
  });

  it("refuses another agent's token before saying anything about its state", () => {
    const spent = { ...token, consumedAt: at(1) };
    expectRefusal(() => verifyGatewayToken(spent, { ...claim, agentId: 'agt_b' }, at(999)), {
      code: 'principal_mismatch',
      message: 'Confirmation token does not match this execute request.',
    });
  });

  it('refuses an unknown token and a used one', () => {
    expectRefusal(() => verifyGatewayToken(null, claim, at(1)), { code: 'invalid_token', message: 'Invalid confirmation token.' });
    expectRefusal(() => verifyGatewayToken({ ...token, consumedAt: at(1) }, claim, at(2)), { code: 'consumed' });
  });

  it('hashes the canonical request, so key order does not matter', () => {
    expect(requestHash({ b: 1, a: { y: 2, x: 1 } })).toBe(requestHash({ a: { x: 1, y: 2 }, b: 1 }));
    expect(requestHash({ a: 1 })).not.toBe(requestHash({ a: '1' }));
  });
});

describe('strict amount ceiling', () => {
  it('accepts the ceiling and refuses one cent more, for amount_cents and for amount', () => {
    expect(() => checkAmountCeiling({ amount_cents: 100 }, 100)).not.toThrow();
    expect(() => checkAmountCeiling({ amount: 100 }, 100)).not.toThrow();
    expectRefusal(() => checkAmountCeiling({ amount_cents: 101 }, 100), {
      code: 'operation_not_allowed',
      message: 'Execute amount exceeds policy limit (100 cents).',
    });
    expectRefusal(() => checkAmountCeiling({ amount: 101 }, 100), { code: 'operation_not_allowed', message: agpMessages.amountExceeds(100) });
  });

  it('counts the larger of amount_cents and amount, and numeric strings', () => {
    expect(requestedAmount({ amount_cents: 50, amount: 5000 })).toEqual({ kind: 'cents', cents: 5000 });
    expect(() => checkAmountCeiling({ amount_cents: 50, amount: 101 }, 100)).toThrow(agpMessages.amountExceeds(100));
    expect(requestedAmount({ amount: '2998' })).toEqual({ kind: 'cents', cents: 2998 });
    expect(requestedAmount({ items: [] })).toEqual({ kind: 'none' });
    expect(requestedAmount({ amount: null })).toEqual({ kind: 'none' });
  });

  it('refuses an amount it cannot read instead of ignoring it', () => {
    expect(requestedAmount({ amount: 'lots' })).toEqual({ kind: 'invalid' });
    expect(requestedAmount({ amount_cents: { value: 1 } })).toEqual({ kind: 'invalid' });
    expect(() => checkAmountCeiling({ amount_cents: 'lots' }, 100)).toThrow(agpMessages.amountNotNumber);
  });

  it('lets a request without an amount through, as the specification does', () => {
    expect(() => checkAmountCeiling({ action: 'bookmark' }, 0)).not.toThrow();
  });
});

describe('policy and summary', () => {
  it('makes a business with an approval step need a token even when the gateway is open', () => {
    expect(effectivePolicy('open', true)).toBe('confirm');
    expect(effectivePolicy('open', false)).toBe('open');
    expect(effectivePolicy('strict', true)).toBe('strict');
  });

  it("writes the reference gateway's summary", () => {
    expect(describeExecuteRequest('joes-pizza', { amount_cents: 2998 })).toBe("Execute request for business 'joes-pizza' (requested amount: 2998 cents)");
    expect(describeExecuteRequest('echo', { action: 'ping' })).toBe("Execute request for business 'echo'");
  });
});
