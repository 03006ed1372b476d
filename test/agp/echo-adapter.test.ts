import { describe, expect, it } from 'vitest';
import { createEchoAdapter, priceEchoOrder } from '../../src/agp/adapters/echo.js';
import type { AdapterContext, AdapterTokenRedemption } from '../../src/agp/adapters/types.js';
import { canonicalJson } from '../../src/core/secrets.js';

/** A context whose token book is a Map: the adapter's own logic, without a database. */
function fakeContext() {
  const issued = new Map<string, { binding: string; used: boolean }>();
  let n = 0;
  const ctx: AdapterContext = {
    businessId: 'echo',
    agentId: 'agt_test',
    transactionId: 'txn_test',
    clock: () => new Date('2026-11-22T10:00:00.000Z'),
    signal: new AbortController().signal,
    fetch: () => Promise.reject(new Error('echo must not call the network')),
    tokens: {
      async mint(binding) {
        n += 1;
        const token = `tk_conf_test${n}`;
        issued.set(token, { binding: canonicalJson(binding), used: false });
        return { token, expiresAt: new Date('2026-11-22T10:05:00.000Z') };
      },
      async redeem(token, binding): Promise<AdapterTokenRedemption> {
        const entry = issued.get(token);
        if (!entry) return { ok: false, reason: 'invalid' };
        if (entry.used) return { ok: false, reason: 'consumed' };
        if (entry.binding !== canonicalJson(binding)) return { ok: false, reason: 'mismatch' };
        entry.used = true;
        return { ok: true, data: null };
      },
    },
  };
  return ctx;
}

const twoWidgets = { serviceId: 'order', items: [{ productId: 'echo-widget-1', quantity: 2 }] };

describe('echo adapter', () => {
  it('prices two widgets at 19.98 + 1.65 tax = 21.63, and a gadget at 24.99 + 2.06 = 27.05', () => {
    expect(priceEchoOrder(twoWidgets)).toMatchObject({ subtotal: 19.98, tax: 1.65, total: 21.63, currency: 'USD' });
    expect(priceEchoOrder({ items: [{ productId: 'echo-widget-2', quantity: 1 }] })).toMatchObject({ subtotal: 24.99, tax: 2.06, total: 27.05 });
  });

  it('answers pending_confirmation, then completed with the token, once', async () => {
    const echo = createEchoAdapter();
    const ctx = fakeContext();
    const pending = await echo.execute(twoWidgets, { idempotencyKey: 'k' }, ctx);
    expect(pending).toMatchObject({
      status: 'pending_confirmation',
      confirmationType: 'payment',
      summary: { items: [{ productId: 'echo-widget-1', name: 'Widget', quantity: 2, price: 9.99 }], subtotal: 19.98, tax: 1.65, total: 21.63 },
      expiresIn: '5 minutes',
    });
    const token = pending.confirmationToken as string;
    const completed = await echo.execute({ ...twoWidgets, confirmationToken: token }, { idempotencyKey: 'k2' }, ctx);
    expect(completed).toMatchObject({ status: 'completed', receipt: { subtotal: 19.98, tax: 1.65, total: 21.63, paidAt: '2026-11-22T10:00:00.000Z' } });
    expect(completed['orderId']).toMatch(/^echo-order-\d+-[0-9a-f]{8}$/);
    expect(await echo.execute({ ...twoWidgets, confirmationToken: token }, { idempotencyKey: 'k3' }, ctx)).toEqual({
      status: 'failed',
      error: 'Confirmation token already used. Please start a new order.',
    });
  });

  it('binds its token to the items', async () => {
    const echo = createEchoAdapter();
    const ctx = fakeContext();
    const pending = await echo.execute(twoWidgets, { idempotencyKey: 'k' }, ctx);
    const more = { serviceId: 'order', items: [{ productId: 'echo-widget-1', quantity: 3 }], confirmationToken: pending.confirmationToken };
    expect(await echo.execute(more, { idempotencyKey: 'k2' }, ctx)).toMatchObject({ status: 'failed', error: expect.stringContaining('does not match') });
  });

  it('simulates a failure and an expired token, and refuses unknown products and tokens', async () => {
    const echo = createEchoAdapter();
    const ctx = fakeContext();
    expect(await echo.execute({ simulate: 'failure' }, { idempotencyKey: 'k' }, ctx)).toEqual({ status: 'failed', error: 'Simulated failure for testing' });
    expect(await echo.execute({ simulate: 'expired' }, { idempotencyKey: 'k' }, ctx)).toEqual({
      status: 'failed',
      error: 'Confirmation token expired. Please start a new order.',
    });
    expect(await echo.execute({ items: [{ productId: 'echo-rocket', quantity: 1 }] }, { idempotencyKey: 'k' }, ctx)).toEqual({
      status: 'failed',
      error: "Unknown product 'echo-rocket'",
    });
    expect(await echo.execute({ ...twoWidgets, confirmationToken: 'echo-confirm-1707836400000' }, { idempotencyKey: 'k' }, ctx)).toEqual({
      status: 'failed',
      error: 'Invalid confirmation token',
    });
  });

  it('serves the catalog and ping as the reference does', async () => {
    const echo = createEchoAdapter();
    const ctx = fakeContext();
    const catalog = (await echo.query({ serviceId: 'catalog' }, ctx)) as { results: Array<{ id: string }> };
    expect(catalog.results.map((product) => product.id)).toEqual(['echo-widget-1', 'echo-widget-2', 'echo-sub-1']);
    expect(await echo.query({ serviceId: 'ping', options: { hello: 'world' } }, ctx)).toEqual({ echo: { hello: 'world' } });
    expect(await echo.query({ serviceId: 'nope' }, ctx)).toEqual({ results: [] });
    const discovered = (await echo.discover(ctx)) as { services: Array<{ id: string }> };
    expect(discovered.services.map((service) => service.id)).toEqual(['catalog', 'order', 'ping']);
  });
});
