import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { startFakePizzeria, type FakePizzeria } from './fake-business.js';
import { startAgpTwokey, type AgpTwokey } from './support.js';

const NOT_APPROVED = 'Confirmation token has not been approved yet.';
const operator = { identity: 'web:alice', via: 'cli' };

const order = { action: 'order', items: [{ productId: 'pepperoni', quantity: 2 }], amount_cents: 2998 };

describe.each(drivers)('chat approval for AGP (%s)', (driver) => {
  let pizzeria: FakePizzeria;
  let twokey: AgpTwokey;
  let apiKey: string;
  const clock = manualClock();

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
    // The gateway is open: the business's approval step alone must require the token.
    twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'open', clock });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
  });
  afterAll(async () => {
    await twokey.close();
    await pizzeria.close();
  });

  const prepare = (request: Record<string, unknown> = order, businessId = 'joes-pizza-approved') =>
    twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId, request } });
  const execute = (token: string | undefined, request: Record<string, unknown> = order, businessId = 'joes-pizza-approved') =>
    twokey.agpRequest('/agp/execute', { apiKey, headers: token ? { 'x-confirmation-token': token } : {}, body: { businessId, request } });

  it('prepare opens a proposal with the summary twokey writes', async () => {
    const prepared = await prepare();
    expect(prepared).toMatchObject({
      status: 200,
      body: {
        summary: 'argus wants to order at joes-pizza-approved for $29.98.',
        businessId: 'joes-pizza-approved',
        approval: { status: 'pending', quorum: 1 },
      },
    });
    expect(prepared.body.proposalId).toMatch(/^prp_/);
    const view = await twokey.agpRequest(`/v1/proposals/${prepared.body.proposalId}`, { apiKey, method: 'GET' });
    expect(view.body).toMatchObject({ status: 'pending', operation: 'agp_order', params: { businessId: 'joes-pizza-approved', request: order } });
  });

  it('refuses execute until a human approves, then executes once', async () => {
    const prepared = await prepare();
    const token = prepared.body.confirmationToken as string;
    const calls = pizzeria.executes().length;

    const early = await execute(token);
    expect(early).toMatchObject({ status: 403, body: { error: { code: 'not_approved', message: NOT_APPROVED }, message: NOT_APPROVED } });
    expect(pizzeria.executes()).toHaveLength(calls);

    await twokey.services.proposals.approve(prepared.body.proposalId, operator);
    const executed = await execute(token);
    expect(executed).toMatchObject({
      status: 200,
      body: { transactionId: prepared.body.proposalId, status: 'succeeded', data: { status: 'completed', receipt: { total: 29.98 } } },
    });
    expect(pizzeria.executes()).toHaveLength(calls + 1);
    // The business dedupes on the proposal id, as every executor does.
    expect(pizzeria.executes().at(-1)?.headers['idempotency-key']).toBe(prepared.body.proposalId);

    const proposal = await twokey.services.proposals.get(prepared.body.proposalId);
    expect(proposal).toMatchObject({ status: 'committed', result: { status: 'completed' } });
    // The same request again, past the token's expiry too: the stored answer, and the business is not called.
    const now = clock();
    clock.set(new Date(proposal.expiresAt.getTime() + 60_000));
    expect(await execute(token)).toMatchObject({
      status: 200,
      headers: { 'idempotent-replayed': 'true' },
      body: { ...executed.body, replayed: true },
    });
    clock.set(now);
    expect(pizzeria.executes()).toHaveLength(calls + 1);
    expect(await execute(token, { ...order, amount_cents: 1 })).toMatchObject({ status: 403, body: { error: { code: 'consumed' } } });
  });

  it('answers "Confirmation was rejected." after a reject', async () => {
    const prepared = await prepare();
    await twokey.services.proposals.reject(prepared.body.proposalId, operator, 'not today');
    expect(await execute(prepared.body.confirmationToken)).toMatchObject({
      status: 403,
      body: { error: { code: 'rejected', message: 'Confirmation was rejected.' } },
    });
  });

  it('needs the token even though the gateway is open, and refuses a changed request', async () => {
    const prepared = await prepare();
    await twokey.services.proposals.approve(prepared.body.proposalId, operator);
    expect(await execute(undefined)).toMatchObject({
      status: 403,
      body: { error: { message: 'Execute confirmation required. Provide x-confirmation-token header.' } },
    });
    expect(await execute(prepared.body.confirmationToken, { ...order, amount_cents: 1 })).toMatchObject({
      status: 403,
      body: { error: { message: 'Confirmation token does not match this execute request.' } },
    });
    expect(await execute(prepared.body.confirmationToken)).toMatchObject({ status: 200 });
  });

  it("does not let the agent's owner approve, nor another agent use the token", async () => {
    const prepared = await prepare();
    await expect(twokey.services.proposals.approve(prepared.body.proposalId, { identity: 'web:owner', via: 'cli' })).rejects.toMatchObject({
      code: 'owner_cannot_approve',
    });
    await twokey.services.proposals.approve(prepared.body.proposalId, operator);
    const { apiKey: otherKey } = await twokey.createAgent('mallory');
    const stolen = await twokey.agpRequest('/agp/execute', {
      apiKey: otherKey,
      headers: { 'x-confirmation-token': prepared.body.confirmationToken },
      body: { businessId: 'joes-pizza-approved', request: order },
    });
    expect(stolen).toMatchObject({ status: 403, body: { error: { code: 'principal_mismatch' } } });
  });

  it('keeps an approved proposal retryable when the business fails', async () => {
    const prepared = await prepare();
    await twokey.services.proposals.approve(prepared.body.proposalId, operator);
    pizzeria.failExecutes(true);
    const failed = await execute(prepared.body.confirmationToken);
    pizzeria.failExecutes(false);
    expect(failed).toMatchObject({ status: 502, body: { error: { code: 'execution_failed' } } });
    expect(await twokey.services.proposals.get(prepared.body.proposalId)).toMatchObject({ status: 'approved', consumedAt: null });
    expect(await execute(prepared.body.confirmationToken)).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
  });

  it('says the token expired once the proposal has', async () => {
    const prepared = await prepare();
    await twokey.services.proposals.approve(prepared.body.proposalId, operator);
    clock.advance(5 * 60_000);
    expect(await execute(prepared.body.confirmationToken)).toMatchObject({
      status: 403,
      body: { error: { code: 'expired', message: 'Confirmation token expired. Prepare a new token.' } },
    });
  });

  it('says a cancelled confirmation is cancelled', async () => {
    const prepared = await prepare();
    await twokey.agpRequest(`/v1/proposals/${prepared.body.proposalId}/cancel`, { apiKey });
    expect(await execute(prepared.body.confirmationToken)).toMatchObject({
      status: 403,
      body: { error: { message: 'Confirmation was cancelled. Prepare a new token.' } },
    });
  });

  it('runs the echo two-step behind an approval', async () => {
    const items = [{ productId: 'echo-widget-1', quantity: 2 }];
    const first = await prepare({ serviceId: 'order', items }, 'echo-approved');
    await twokey.services.proposals.approve(first.body.proposalId, operator);
    const pending = await execute(first.body.confirmationToken, { serviceId: 'order', items }, 'echo-approved');
    expect(pending.body.data).toMatchObject({ status: 'pending_confirmation', summary: { total: 21.63 } });

    const confirm = { serviceId: 'order', items, confirmationToken: pending.body.data.confirmationToken };
    const second = await prepare(confirm, 'echo-approved');
    await twokey.services.proposals.approve(second.body.proposalId, operator);
    const completed = await execute(second.body.confirmationToken, confirm, 'echo-approved');
    expect(completed.body.data).toMatchObject({ status: 'completed', receipt: { total: 21.63 } });
  });

  it("refuses a request the operation's params schema refuses, and asks no one", async () => {
    const before = (await twokey.services.store.listProposals({ limit: 1000 })).length;
    const refused = await prepare({ action: 7 });
    expect(refused).toMatchObject({ status: 400, body: { error: { code: 'invalid_params' } } });
    expect((await twokey.services.store.listProposals({ limit: 1000 })).length).toBe(before);
  });
});
