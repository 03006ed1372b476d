import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startFakePizzeria, type FakePizzeria } from './fake-business.js';
import { startAgpTwokey, type AgpTwokey } from './support.js';

/** `strict` over HTTP: amounts wherever they hide, and numbers JSON cannot carry exactly. */
describe.each(drivers)('strict amounts through /agp (%s)', (driver) => {
  let pizzeria: FakePizzeria;
  let twokey: AgpTwokey;
  let apiKey: string;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
    twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'strict', maxAmountCents: 5_000 });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey.close();
    await pizzeria.close();
  });

  const prepare = (businessId: string, request: Record<string, unknown>) =>
    twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId, request } });

  it('refuses nested, renamed, negative and fractional amounts before any token is minted', async () => {
    const calls = pizzeria.calls.length;
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ order: { amount_cents: 99_999_999 } }, 'Execute amount exceeds policy limit (5000 cents).'],
      [{ total_cents: 99_999_999 }, 'Execute amount exceeds policy limit (5000 cents).'],
      [{ amountCents: 99_999_999 }, 'Execute amount exceeds policy limit (5000 cents).'],
      [{ amount_cents: -100 }, 'Execute amount at /amount_cents must be a non-negative integer number of cents.'],
      [{ items: [{ price: 12.5 }] }, 'Execute amount at /items/0/price must be a non-negative integer number of cents.'],
    ];
    for (const [request, message] of refusals) {
      expect(await prepare('joes-pizza', request)).toMatchObject({ status: 403, body: { error: { code: 'operation_not_allowed', message }, message } });
    }
    expect(pizzeria.calls.length).toBe(calls);
    expect((await twokey.services.store.listAudit({})).filter((event) => event.type === 'agp.prepared')).toEqual([]);
  });

  it("reads a business's declared amount and lets what is under the ceiling through", async () => {
    expect(await prepare('joes-pizza-declared', { order: { sum: 5_001 } })).toMatchObject({ status: 403, body: { error: { code: 'operation_not_allowed' } } });
    const ok = await prepare('joes-pizza-declared', { order: { sum: 4_000 }, note_total: 'not read here' });
    expect(ok).toMatchObject({ status: 200, body: { summary: "Execute request for business 'joes-pizza-declared' (requested amount: 4000 cents)" } });
  });

  it('refuses a number beyond Number.MAX_SAFE_INTEGER with a 400 naming its path, instead of rounding it', async () => {
    const response = await twokey.app.inject({
      method: 'POST',
      url: '/agp/execute/prepare',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      payload: '{"businessId":"joes-pizza","request":{"order":{"qty":9007199254740993}}}',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: { code: 'invalid_request', details: [{ path: '/request/order/qty' }] } });
    expect(response.json().message).toContain('/request/order/qty');
  });
});
