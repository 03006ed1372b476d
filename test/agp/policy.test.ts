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
    expect(requestedAmount({ amount_cents: 50, amount: 5000 })).toEqual({ kind: 'cents', cents: 5000, path: '/amount' });
    expect(() => checkAmountCeiling({ amount_cents: 50, amount: 101 }, 100)).toThrow(agpMessages.amountExceeds(100));
    expect(requestedAmount({ amount: '2998' })).toEqual({ kind: 'cents', cents: 2998, path: '/amount' });
    expect(requestedAmount({ items: [] })).toEqual({ kind: 'none' });
    expect(requestedAmount({ amount: null })).toEqual({ kind: 'none' });
  });

  it('refuses an amount it cannot read instead of ignoring it', () => {
    expect(requestedAmount({ amount: 'lots' })).toEqual({ kind: 'invalid', path: '/amount' });
    expect(requestedAmount({ amount_cents: { value: 1 } })).toEqual({ kind: 'invalid', path: '/amount_cents' });
    expect(() => checkAmountCeiling({ amount_cents: 'lots' }, 100)).toThrow(agpMessages.amountNotNumber('/amount_cents'));
  });

  it('looks at every key that names an amount, at any depth, in any spelling', () => {
    for (const request of [
      { order: { amount_cents: 99_999_999 } },
      { total_cents: 99_999_999 },
      { amountCents: 99_999_999 },
      { 'order-total': 99_999_999 },
      {
        items: [
          { sku: 'a', unitPrice: 1 },
          { sku: 'b', unit_price: 99_999_999 },
        ],
      },
      { price: { amount: 99_999_999, currency: 'USD' } },
      { deliveryFee: '99999999' },
    ]) {
      expectRefusal(() => checkAmountCeiling(request, 100), { code: 'operation_not_allowed', message: agpMessages.amountExceeds(100) });
    }
    expect(requestedAmount({ items: [{ unit_price: 5 }], order: { total: 40 } })).toEqual({ kind: 'cents', cents: 40, path: '/order/total' });
    // Words that merely end like one are not amounts.
    expect(requestedAmount({ coffee: 99_999_999, fees_waived: true, amounts_count: 3 })).toEqual({ kind: 'none' });
  });

  it('refuses negative and fractional amounts, naming where they are', () => {
    expectRefusal(() => checkAmountCeiling({ amount_cents: -1 }, 100), {
      code: 'operation_not_allowed',
      message: agpMessages.amountNotNumber('/amount_cents'),
    });
    expectRefusal(() => checkAmountCeiling({ order: { total: 10.5 } }, 100), {
      code: 'operation_not_allowed',
      message: agpMessages.amountNotNumber('/order/total'),
    });
    expectRefusal(() => checkAmountCeiling({ amount: '-5' }, 100), { code: 'operation_not_allowed', message: agpMessages.amountNotNumber('/amount') });
    expect(agpMessages.amountNotNumber('/order/total')).toBe('Execute amount at /order/total must be a non-negative integer number of cents.');
  });

  it("reads only a business's declared amount pointers when it declares them", () => {
    const declared = ['/order/sum', '/tip~1extra'];
    expect(requestedAmount({ order: { sum: 700 }, 'tip/extra': 50, amount: 99_999 }, declared)).toEqual({ kind: 'cents', cents: 700, path: '/order/sum' });
    expectRefusal(() => checkAmountCeiling({ order: { sum: 101 } }, 100, declared), { code: 'operation_not_allowed', message: agpMessages.amountExceeds(100) });
    expectRefusal(() => checkAmountCeiling({ order: { sum: { v: 1 } } }, 100, declared), {
      code: 'operation_not_allowed',
      message: agpMessages.amountNotNumber('/order/sum'),
    });
    expect(requestedAmount({ order: {} }, declared)).toEqual({ kind: 'none' });
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
