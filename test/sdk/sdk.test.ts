import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Twokey, TwokeyApiError } from '@twokey/client';
import { drivers } from '../support/database.js';
import { startFakePizzeria, type FakePizzeria } from '../agp/fake-business.js';
import { startAgpTwokey, type AgpTwokey } from '../agp/support.js';

const order = { action: 'order', items: [{ productId: 'pepperoni', quantity: 2 }], amount_cents: 2998 };

describe.each(drivers)('the SDK against a running twokey (%s)', (driver) => {
  let pizzeria: FakePizzeria;
  let twokey: AgpTwokey;
  let client: Twokey;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
    twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'confirm', listen: true });
    const { apiKey } = await twokey.createAgent('argus');
    if (!twokey.url) throw new Error('twokey is not listening');
    client = new Twokey({ baseUrl: `${twokey.url}/`, apiKey });
  });
  afterAll(async () => {
    await twokey.close();
    await pizzeria.close();
  });

  describe('AGP', () => {
    it("runs the specification's SDK example: prepare, then execute with the token and an idempotency key", async () => {
      const { confirmationToken, expiresAt, summary } = await client.prepare('joes-pizza', order);
      expect(summary).toBe("Execute request for business 'joes-pizza' (requested amount: 2998 cents)");
      expect(Date.parse(expiresAt)).toBeGreaterThan(Date.now());

      const calls = pizzeria.executes().length;
      const result = await client.execute('joes-pizza', order, { confirmationToken, idempotencyKey: 'order-pepperoni-abc123' });
      expect(result).toMatchObject({ status: 'succeeded', businessId: 'joes-pizza', data: { status: 'completed', receipt: { total: 29.98 } } });

      // The same Idempotency-Key replays the answer; the spent token is not even looked at.
      const again = await client.execute('joes-pizza', order, { confirmationToken, idempotencyKey: 'order-pepperoni-abc123' });
      expect(again).toEqual(result);
      expect(pizzeria.executes()).toHaveLength(calls + 1);
    });

    it('discovers and queries', async () => {
      expect((await client.discover('echo')).data).toMatchObject({ business: { name: 'Echo Labs' } });
      expect(await client.query<{ results: unknown[] }>('joes-pizza', { serviceId: 'menu' })).toMatchObject({
        data: { results: [{ id: 'pepperoni' }, { id: 'margherita' }] },
      });
    });

    it("throws a typed error carrying the server's code, message and request id", async () => {
      const failure = client.execute('joes-pizza', order);
      await expect(failure).rejects.toBeInstanceOf(TwokeyApiError);
      await expect(failure).rejects.toMatchObject({
        status: 403,
        code: 'invalid_token',
        message: 'Execute confirmation required. Provide x-confirmation-token header.',
        requestId: expect.stringMatching(/^req_/),
      });
      const { confirmationToken } = await client.prepare('joes-pizza', order);
      await expect(client.execute('joes-pizza', { ...order, amount_cents: 1 }, { confirmationToken })).rejects.toMatchObject({
        status: 403,
        code: 'params_mismatch',
        message: 'Confirmation token does not match this execute request.',
      });
    });
  });

  describe('native API', () => {
    it('proposes, waits for the approval, commits and reads the result', async () => {
      expect((await client.operations()).map((operation) => operation.name)).toContain('upgrade_plan');
      const proposal = await client.propose({ operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } }, { idempotencyKey: 'up-1' });
      expect(proposal).toMatchObject({ status: 'pending', summary: 'argus wants to move acme to pro.' });

      const waiting = client.wait(proposal.id, { timeoutMs: 20_000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await twokey.services.proposals.approve(proposal.id, { identity: 'web:alice', via: 'cli' });
      expect(await waiting).toMatchObject({ id: proposal.id, status: 'approved', approvals: [{ approver: 'web:alice' }] });

      const committed = await client.commit(
        proposal.id,
        { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } },
        { confirmToken: proposal.confirmToken },
      );
      expect(committed).toMatchObject({ status: 'committed', result: { echoed: true } });
      expect(await client.get(proposal.id)).toMatchObject({ status: 'committed' });
      // The same commit again (its answer lost on the way) gets the stored result; any other use of the token is refused.
      expect(
        await client.commit(proposal.id, { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } }, { confirmToken: proposal.confirmToken }),
      ).toMatchObject({ status: 'committed', result: { echoed: true }, replayed: true });
      await expect(
        client.commit(proposal.id, { operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } }, { confirmToken: proposal.confirmToken }),
      ).rejects.toMatchObject({ status: 403, code: 'consumed' });
    });

    it('returns the latest view when the wait times out, and cancels', async () => {
      const proposal = await client.propose({ operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } });
      const started = Date.now();
      expect(await client.wait(proposal.id, { timeoutMs: 1_200 })).toMatchObject({ status: 'pending' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
      expect(await client.cancel(proposal.id)).toMatchObject({ status: 'cancelled', decision: { by: 'agent:argus' } });
      await expect(client.get('prp_doesnotexist')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    });
  });
});

describe('the SDK on its own', () => {
  const answer =
    (status: number, body: unknown): typeof fetch =>
    async () =>
      new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

  it('sends the two headers exactly as the AGP SDK does', async () => {
    let seen: Headers | null = null;
    const fetchSpy: typeof fetch = async (_url, init) => {
      seen = new Headers(init?.headers);
      return new Response('{"transactionId":"txn_1","operation":"execute","businessId":"b","status":"succeeded","data":{}}', { status: 200 });
    };
    await new Twokey({ baseUrl: 'http://127.0.0.1:1', apiKey: 'tk_agent_x', fetch: fetchSpy }).execute(
      'b',
      {},
      { confirmationToken: 'tk_conf_t', idempotencyKey: 'k' },
    );
    const headers = seen as Headers | null;
    expect(headers?.get('x-confirmation-token')).toBe('tk_conf_t');
    expect(headers?.get('idempotency-key')).toBe('k');
    expect(headers?.get('authorization')).toBe('Bearer tk_agent_x');
  });

  it("reads an AGP reference gateway's string errors too", async () => {
    const client = new Twokey({ baseUrl: 'http://127.0.0.1:1', apiKey: 'tk_agent_x', fetch: answer(403, { error: 'Invalid confirmation token.' }) });
    await expect(client.execute('b', {})).rejects.toMatchObject({ status: 403, code: 'http_403', message: 'Invalid confirmation token.', requestId: null });
  });

  it('reports an unreachable server as status 0', async () => {
    const client = new Twokey({ baseUrl: 'http://127.0.0.1:1', apiKey: 'tk_agent_x' });
    await expect(client.get('prp_1')).rejects.toMatchObject({ status: 0, code: 'network_error' });
  });

  it('refuses a configuration it cannot use', () => {
    expect(() => new Twokey({ baseUrl: 'localhost:8080', apiKey: 'tk_agent_x' })).toThrow(/baseUrl/);
    expect(() => new Twokey({ baseUrl: 'http://127.0.0.1:8080', apiKey: '' })).toThrow(/API key/);
  });
});
