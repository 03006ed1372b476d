import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startFakePizzeria, type FakePizzeria } from '../agp/fake-business.js';
import { startAgpTwokey, type AgpTwokey } from '../agp/support.js';

const policy = `    policy:
      - when: "params.request.amount_cents <= 1000"
        decide: approve
        reason: small orders are automatic
      - when: "params.request.amount_cents > 50000"
        decide: deny
        reason: orders over $500 are not placed by agents
`;

describe.each(drivers)('policy rules on an AGP business with an approval operation (%s)', (driver) => {
  let pizzeria: FakePizzeria;
  let twokey: AgpTwokey;
  let apiKey: string;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
    twokey = await startAgpTwokey({
      driver,
      pizzeriaUrl: pizzeria.url,
      policy: 'open',
      editConfig: (yaml) =>
        yaml.replace(
          '    approval:\n      approvers: [web:alice, web:bob, web:owner]',
          `${policy}    approval:\n      approvers: [web:alice, web:bob, web:owner]`,
        ),
    });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
  });
  afterAll(async () => {
    await twokey.close();
    await pizzeria.close();
  });

  const order = (amount: number) => ({ action: 'order', items: [{ productId: 'pepperoni', quantity: 1 }], amount_cents: amount });
  const prepare = (request: Record<string, unknown>) =>
    twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId: 'joes-pizza-approved', request } });
  const execute = (token: string, request: Record<string, unknown>) =>
    twokey.agpRequest('/agp/execute', { apiKey, headers: { 'x-confirmation-token': token }, body: { businessId: 'joes-pizza-approved', request } });

  it('a small order is approved by the rule at prepare and executes with no human', async () => {
    const request = order(999);
    const prepared = await prepare(request);
    expect(prepared.body.approval).toEqual({ status: 'approved', quorum: 1, decidedBy: 'policy:agp_order#0', reason: 'small orders are automatic' });
    const calls = pizzeria.executes().length;
    const executed = await execute(prepared.body.confirmationToken, request);
    expect(executed.status).toBe(200);
    expect(pizzeria.executes()).toHaveLength(calls + 1);
    const view = await twokey.agpRequest(`/v1/proposals/${prepared.body.proposalId}`, { apiKey, method: 'GET' });
    expect(view.body.outcome).toMatchObject({ outcome: 'committed', decidedBy: ['policy:agp_order#0'] });
  });

  it('a huge order is denied at prepare with the reason, and execute refuses', async () => {
    const request = order(60000);
    const prepared = await prepare(request);
    expect(prepared.body.approval).toMatchObject({ status: 'rejected', decidedBy: 'policy:agp_order#1', reason: 'orders over $500 are not placed by agents' });
    const calls = pizzeria.executes().length;
    const executed = await execute(prepared.body.confirmationToken, request);
    expect(executed.status).toBe(403);
    expect(pizzeria.executes()).toHaveLength(calls);
  });

  it('an order in between waits for a human', async () => {
    const prepared = await prepare(order(5000));
    expect(prepared.body.approval).toEqual({ status: 'pending', quorum: 1 });
  });
});
