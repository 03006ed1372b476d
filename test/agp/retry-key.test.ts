import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startFakePizzeria, type FakePizzeria } from './fake-business.js';
import { startAgpTwokey, type AgpTwokey } from './support.js';

const order = { action: 'order', items: [{ productId: 'pepperoni', quantity: 1 }], amount_cents: 1499 };

/**
 * A failed call releases the token for a retry. The business may already have acted, so every retry
 * of one token must carry the same Idempotency-Key to the business, whatever key the agent sends us.
 */
describe.each(drivers)('the key a business sees is fixed by the token (%s)', (driver) => {
  let pizzeria: FakePizzeria;
  let twokey: AgpTwokey;
  let apiKey: string;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
    twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'strict', maxAmountCents: 100_000 });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey.close();
    await pizzeria.close();
  });

  async function retryWithNewHeader(businessId: string, lose: number | 'hang') {
    const prepared = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId, request: order } });
    expect(prepared.status).toBe(200);
    const send = (idempotencyKey: string) =>
      twokey.agpRequest('/agp/execute', {
        apiKey,
        headers: { 'x-confirmation-token': prepared.body.confirmationToken, 'idempotency-key': idempotencyKey },
        body: { businessId, request: order },
      });
    const ordersBefore = pizzeria.orders.size;
    pizzeria.actThenLoseAnswer(lose);
    const failed = await send(`${businessId}-first-attempt`);
    pizzeria.actThenLoseAnswer(null);
    expect(failed).toMatchObject({ status: 502, body: { error: { code: 'execution_failed' } } });
    expect(pizzeria.orders.size).toBe(ordersBefore + 1);

    const retried = await send(`${businessId}-second-attempt`);
    expect(retried).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
    const [first, second] = pizzeria.executes().slice(-2);
    expect(first?.headers['idempotency-key']).toMatch(/^agp_[0-9a-f]{40}$/);
    expect(second?.headers['idempotency-key']).toBe(first?.headers['idempotency-key']);
    // The business deduped on the key: one order for one token.
    expect(pizzeria.orders.size).toBe(ordersBefore + 1);
  }

  it('a business that acts and then answers 502', async () => {
    await retryWithNewHeader('joes-pizza', 502);
  });

  it('a business that acts and then never answers (twokey times out)', async () => {
    await retryWithNewHeader('joes-pizza-quick', 'hang');
  });
});
