import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { JOES_PIZZA_TOKEN, startFakePizzeria, type FakePizzeria } from './fake-business.js';
import { startAgpTwokey, type AgpTwokey } from './support.js';

const order = { action: 'order', items: [{ productId: 'pepperoni', quantity: 2 }], amount_cents: 2998 };

describe.each(drivers)('the specification flows (%s)', (driver) => {
  let pizzeria: FakePizzeria;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
  });
  afterAll(() => pizzeria.close());

  describe("Joe's Pizza under AGENR_EXECUTE_POLICY=confirm", () => {
    let twokey: AgpTwokey;
    let apiKey: string;

    beforeAll(async () => {
      twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'confirm' });
      ({ apiKey } = await twokey.createAgent('argus'));
    });
    afterAll(() => twokey.close());

    it('discovers, queries the menu, prepares and executes with the token', async () => {
      const discovered = await twokey.agpRequest('/agp/discover', { apiKey, body: { businessId: 'joes-pizza' } });
      expect(discovered).toMatchObject({
        status: 200,
        body: { operation: 'discover', businessId: 'joes-pizza', status: 'succeeded', data: { business: { name: "Joe's Pizza" }, hours: '11:00-23:00' } },
      });
      expect(discovered.body.transactionId).toMatch(/^txn_/);

      const menu = await twokey.agpRequest('/agp/query', { apiKey, body: { businessId: 'joes-pizza', request: { serviceId: 'menu' } } });
      expect(menu.body.data.results).toEqual([
        { id: 'pepperoni', name: 'Pepperoni Pizza', price: 14.99, currency: 'USD' },
        { id: 'margherita', name: 'Margherita', price: 12.99, currency: 'USD' },
      ]);

      const prepared = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'joes-pizza', request: order } });
      expect(prepared.status).toBe(200);
      expect(prepared.body).toEqual({
        confirmationToken: expect.stringMatching(/^tk_conf_[A-Za-z0-9_-]{43}$/),
        expiresAt: expect.any(String),
        summary: "Execute request for business 'joes-pizza' (requested amount: 2998 cents)",
        businessId: 'joes-pizza',
      });
      expect(Date.parse(prepared.body.expiresAt) - Date.now()).toBeGreaterThan(4 * 60_000);

      const before = pizzeria.executes().length;
      const executed = await twokey.agpRequest('/agp/execute', {
        apiKey,
        headers: { 'x-confirmation-token': prepared.body.confirmationToken },
        body: { businessId: 'joes-pizza', request: order },
      });
      expect(executed).toMatchObject({
        status: 200,
        body: { operation: 'execute', businessId: 'joes-pizza', status: 'succeeded', data: { status: 'completed', receipt: { total: 29.98 } } },
      });
      expect(pizzeria.executes()).toHaveLength(before + 1);
    });

    it("injects the business's credentials, which no agent ever sees", async () => {
      const prepared = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'joes-pizza', request: order } });
      const executed = await twokey.agpRequest('/agp/execute', {
        apiKey,
        headers: { 'x-confirmation-token': prepared.body.confirmationToken },
        body: { businessId: 'joes-pizza', request: order },
      });
      const call = pizzeria.executes().at(-1);
      expect(call?.headers.authorization).toBe(`Bearer ${JOES_PIZZA_TOKEN}`);
      expect(call?.body).toEqual({ businessId: 'joes-pizza', request: order });
      // The key the business dedupes on is derived, never the agent's token itself.
      expect(call?.headers['idempotency-key']).toMatch(/^agp_[0-9a-f]{40}$/);
      expect(JSON.stringify(executed.body)).not.toContain(JOES_PIZZA_TOKEN);
      expect(twokey.logs.join('')).not.toContain(JOES_PIZZA_TOKEN);
    });

    it('answers a refusal by the business as an AGP error result', async () => {
      const closed = { action: 'close' };
      const prepared = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'joes-pizza', request: closed } });
      const executed = await twokey.agpRequest('/agp/execute', {
        apiKey,
        headers: { 'x-confirmation-token': prepared.body.confirmationToken },
        body: { businessId: 'joes-pizza', request: closed },
      });
      expect(executed).toMatchObject({ status: 200, body: { data: { status: 'error', message: 'Restaurant is closed', httpStatus: 409 } } });
    });

    it('releases the token when the business fails, so a retry places exactly one order', async () => {
      const prepared = await twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'joes-pizza', request: order } });
      const send = () =>
        twokey.agpRequest('/agp/execute', {
          apiKey,
          headers: { 'x-confirmation-token': prepared.body.confirmationToken },
          body: { businessId: 'joes-pizza', request: order },
        });
      const ordersBefore = pizzeria.orders.size;
      pizzeria.failExecutes(true);
      const failed = await send();
      pizzeria.failExecutes(false);
      expect(failed).toMatchObject({
        status: 502,
        body: { error: { code: 'execution_failed', message: "business 'joes-pizza' answered HTTP 500 to execute" } },
      });
      expect(JSON.stringify(failed.body)).not.toContain(JOES_PIZZA_TOKEN);

      const retried = await send();
      expect(retried).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
      const [first, second] = pizzeria.executes().slice(-2);
      expect(first?.headers['idempotency-key']).toBe(second?.headers['idempotency-key']);
      expect(pizzeria.orders.size).toBe(ordersBefore + 1);

      const third = await send();
      expect(third).toMatchObject({ status: 200, body: { ...retried.body, replayed: true } });
      expect(pizzeria.orders.size).toBe(ordersBefore + 1);
    });

    it('records the execution in the audit chain, never the token', async () => {
      const events = await twokey.services.store.listAudit({});
      const types = events.map((event) => event.type);
      expect(types).toEqual(expect.arrayContaining(['agp.prepared', 'agp.execute.started', 'agp.executed', 'agp.execute.failed']));
      expect(JSON.stringify(events)).not.toMatch(/tk_conf_/);
      // Tokens and keys reach the log only scrubbed.
      expect(twokey.logs.join('')).not.toMatch(/tk_(?:conf|agent)_[A-Za-z0-9_-]{8,}/);
    });

    it('refuses an unknown business and an unauthenticated caller', async () => {
      expect(await twokey.agpRequest('/agp/discover', { apiKey, body: { businessId: 'nowhere' } })).toMatchObject({
        status: 404,
        body: { error: { code: 'not_found', message: "No business registered with ID 'nowhere'." } },
      });
      expect(await twokey.agpRequest('/agp/discover', { body: { businessId: 'echo' } })).toMatchObject({
        status: 401,
        body: { error: { code: 'unauthorized' } },
      });
      expect(await twokey.agpRequest('/agp/discover', { apiKey: 'tk_agent_nope', body: { businessId: 'echo' } })).toMatchObject({ status: 401 });
      expect(await twokey.agpRequest('/agp/query', { apiKey, body: { businessId: 'echo' } })).toMatchObject({
        status: 400,
        body: { error: { code: 'invalid_request' } },
      });
    });

    it('answers an unknown /agp path with a 404 that AGP clients can read (top-level message)', async () => {
      const unknown = await twokey.agpRequest('/agp/execute/confirm', { apiKey, body: { businessId: 'echo' } });
      expect(unknown).toMatchObject({
        status: 404,
        body: { error: { code: 'not_found', message: 'no route POST /agp/execute/confirm' }, message: 'no route POST /agp/execute/confirm' },
      });
    });
  });

  describe('the Echo adapter two-step (policy open)', () => {
    let twokey: AgpTwokey;
    let apiKey: string;
    const items = [{ productId: 'echo-widget-1', quantity: 2 }];

    beforeAll(async () => {
      twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'open' });
      ({ apiKey } = await twokey.createAgent('argus'));
    });
    afterAll(() => twokey.close());

    const execute = (request: Record<string, unknown>, key = apiKey) =>
      twokey.agpRequest('/agp/execute', { apiKey: key, body: { businessId: 'echo', request } });

    it('answers pending_confirmation, then completed with the adapter token', async () => {
      const pending = await execute({ serviceId: 'order', items });
      expect(pending).toMatchObject({
        status: 200,
        body: {
          status: 'succeeded',
          data: {
            status: 'pending_confirmation',
            summary: { items: [{ productId: 'echo-widget-1', name: 'Widget', quantity: 2, price: 9.99 }], subtotal: 19.98, tax: 1.65, total: 21.63 },
            message: 'Please confirm this order. Pass the confirmationToken back to execute to complete.',
          },
        },
      });
      const token = pending.body.data.confirmationToken as string;
      expect(token).toMatch(/^tk_conf_/);

      const completed = await execute({ serviceId: 'order', confirmationToken: token, items });
      expect(completed).toMatchObject({
        status: 200,
        body: { data: { status: 'completed', receipt: { subtotal: 19.98, tax: 1.65, total: 21.63 } } },
      });
      expect(completed.body.data.orderId).toMatch(/^echo-order-/);
      expect(Number.isNaN(Date.parse(completed.body.data.receipt.paidAt))).toBe(false);

      const again = await execute({ serviceId: 'order', confirmationToken: token, items });
      expect(again.body.data).toEqual({ status: 'failed', error: 'Confirmation token already used. Please start a new order.' });
    });

    it('binds the adapter token to the items and to the agent', async () => {
      const pending = await execute({ serviceId: 'order', items });
      const token = pending.body.data.confirmationToken as string;
      const more = await execute({ serviceId: 'order', confirmationToken: token, items: [{ productId: 'echo-widget-1', quantity: 20 }] });
      expect(more.body.data).toEqual({ status: 'failed', error: 'Confirmation token does not match this order. Please start a new order.' });

      const { apiKey: otherKey } = await twokey.createAgent('mallory');
      const stolen = await execute({ serviceId: 'order', confirmationToken: token, items }, otherKey);
      expect(stolen.body.data).toEqual({ status: 'failed', error: 'Invalid confirmation token' });

      // Neither refusal spent it.
      expect((await execute({ serviceId: 'order', confirmationToken: token, items })).body.data.status).toBe('completed');
    });

    it("refuses the specification's timestamp tokens", async () => {
      const forged = await execute({ serviceId: 'order', confirmationToken: 'echo-confirm-1707836400000', items });
      expect(forged.body.data).toEqual({ status: 'failed', error: 'Invalid confirmation token' });
    });

    it('simulates a failure and an expired token', async () => {
      expect((await execute({ serviceId: 'order', simulate: 'failure' })).body.data).toEqual({ status: 'failed', error: 'Simulated failure for testing' });
      expect((await execute({ serviceId: 'order', simulate: 'expired' })).body.data).toEqual({
        status: 'failed',
        error: 'Confirmation token expired. Please start a new order.',
      });
    });

    it('serves its catalog', async () => {
      const catalog = await twokey.agpRequest('/agp/query', { apiKey, body: { businessId: 'echo', request: { serviceId: 'catalog' } } });
      expect(catalog.body.data.results[0]).toEqual({ id: 'echo-widget-1', name: 'Widget', price: 9.99, currency: 'USD' });
    });
  });
});
