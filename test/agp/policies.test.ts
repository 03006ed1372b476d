import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestHash } from '../../src/agp/policy.js';
import { mintConfirmToken, sha256Hex } from '../../src/core/secrets.js';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { startFakePizzeria, type FakePizzeria } from './fake-business.js';
import { startAgpTwokey, type AgpTwokey } from './support.js';

const MISSING = 'Execute confirmation required. Provide x-confirmation-token header.';
const EXPIRED = 'Confirmation token expired. Prepare a new token.';
const MISMATCH = 'Confirmation token does not match this execute request.';

const order = { action: 'order', items: [{ productId: 'margherita', quantity: 1 }], amount_cents: 1299 };

describe.each(drivers)('gateway policies (%s)', (driver) => {
  let pizzeria: FakePizzeria;

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
  });
  afterAll(() => pizzeria.close());

  function client(twokey: AgpTwokey, apiKey: string) {
    return {
      prepare: (request: Record<string, unknown>, businessId = 'joes-pizza') =>
        twokey.agpRequest('/agp/execute/prepare', { apiKey, body: { businessId, request } }),
      execute: (request: Record<string, unknown>, token?: string, businessId = 'joes-pizza') =>
        twokey.agpRequest('/agp/execute', { apiKey, headers: token === undefined ? {} : { 'x-confirmation-token': token }, body: { businessId, request } }),
    };
  }

  describe('open', () => {
    let twokey: AgpTwokey;
    let agent: ReturnType<typeof client>;

    beforeAll(async () => {
      twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'open' });
      agent = client(twokey, (await twokey.createAgent('argus')).apiKey);
    });
    afterAll(() => twokey.close());

    it('executes without a token and ignores a bad one', async () => {
      expect(await agent.execute(order)).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
      expect(await agent.execute(order, 'tk_conf_garbage')).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
    });

    it("writes its audit row with the Idempotency-Key's outcome; when that write fails, no answer goes out and the key is freed", async () => {
      const { db } = twokey.services.database;
      const apiKey = (await twokey.createAgent('keyed')).apiKey;
      const keyed = () =>
        twokey.agpRequest('/agp/execute', { apiKey, headers: { 'idempotency-key': 'open-1' }, body: { businessId: 'joes-pizza', request: order } });
      const executedRows = async () => (await twokey.services.store.listAudit({ limit: 10_000 })).filter((event) => event.type === 'agp.executed').length;
      const before = await executedRows();
      // A real refusal by the database, of the one statement that settles the key.
      await db.execute(sql`create function refuse_key_outcome() returns trigger language plpgsql as $$ begin raise exception 'refused'; end $$`);
      await db.execute(sql`create trigger refuse_key_outcome before update on idempotency_keys for each row execute function refuse_key_outcome()`);
      try {
        const failed = await keyed();
        expect(failed.status).toBeGreaterThanOrEqual(500);
        expect(JSON.stringify(failed.body)).not.toContain('completed');
        expect(await executedRows()).toBe(before);
      } finally {
        await db.execute(sql`drop trigger refuse_key_outcome on idempotency_keys`);
        await db.execute(sql`drop function refuse_key_outcome()`);
      }
      const first = await keyed();
      expect(first).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(await executedRows()).toBe(before + 1);
      const calls = pizzeria.executes().length;
      expect(await keyed()).toMatchObject({ status: 200, body: first.body, headers: { 'idempotent-replayed': 'true' } });
      expect(pizzeria.executes()).toHaveLength(calls);
      expect(await executedRows()).toBe(before + 1);
    });

    it('still hands out tokens, for agents that always prepare', async () => {
      const prepared = await agent.prepare(order);
      expect(prepared.status).toBe(200);
      expect(await agent.execute(order, prepared.body.confirmationToken)).toMatchObject({ status: 200 });
    });
  });

  describe('confirm', () => {
    let twokey: AgpTwokey;
    let agent: ReturnType<typeof client>;
    let other: ReturnType<typeof client>;
    const clock = manualClock();

    beforeAll(async () => {
      twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'confirm', clock });
      agent = client(twokey, (await twokey.createAgent('argus')).apiKey);
      other = client(twokey, (await twokey.createAgent('mallory')).apiKey);
    });
    afterAll(() => twokey.close());

    it('refuses a missing token with 403 and runs nothing', async () => {
      const calls = pizzeria.executes().length;
      const refused = await agent.execute(order);
      expect(refused).toMatchObject({ status: 403, body: { error: { code: 'invalid_token', message: MISSING }, message: MISSING } });
      expect(refused.body.error.requestId).toMatch(/^req_/);
      expect(pizzeria.executes()).toHaveLength(calls);
    });

    it('refuses an unknown token', async () => {
      expect(await agent.execute(order, 'tk_conf_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).toMatchObject({
        status: 403,
        body: { error: { code: 'invalid_token', message: 'Invalid confirmation token.' } },
      });
    });

    it('accepts a token at 299 s and refuses it at 300 s, word for word', async () => {
      const early = await agent.prepare(order);
      const late = await agent.prepare(order);
      clock.advance(299_000);
      expect(await agent.execute(order, early.body.confirmationToken)).toMatchObject({ status: 200 });
      clock.advance(1_000);
      expect(await agent.execute(order, late.body.confirmationToken)).toMatchObject({
        status: 403,
        body: { error: { code: 'expired', message: EXPIRED }, message: EXPIRED },
      });
    });

    it('refuses another businessId and another request, word for word, without spending the token', async () => {
      const prepared = await agent.prepare(order);
      const token = prepared.body.confirmationToken as string;
      expect(await agent.execute(order, token, 'echo')).toMatchObject({
        status: 403,
        body: { error: { code: 'params_mismatch', message: MISMATCH }, message: MISMATCH },
      });
      expect(await agent.execute({ ...order, amount_cents: 1 }, token)).toMatchObject({ status: 403, body: { error: { message: MISMATCH } } });
      expect(await agent.execute({ ...order, items: [{ productId: 'margherita', quantity: 9 }] }, token)).toMatchObject({ status: 403 });
      // Same request with the keys in another order is the same request.
      const reordered = { amount_cents: 1299, items: [{ quantity: 1, productId: 'margherita' }], action: 'order' };
      expect(await agent.execute(reordered, token)).toMatchObject({ status: 200 });
    });

    it('spends a token once: the same request again gets the stored answer, anything else "consumed"', async () => {
      const prepared = await agent.prepare(order);
      const token = prepared.body.confirmationToken as string;
      const first = await agent.execute(order, token);
      expect(first).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
      expect(first.body).not.toHaveProperty('replayed');
      const calls = pizzeria.executes().length;

      // The agent's connection died before the answer: it asks again with the same token and request.
      const again = await agent.execute(order, token);
      expect(again).toMatchObject({ status: 200, headers: { 'idempotent-replayed': 'true' }, body: { ...first.body, replayed: true } });
      expect(pizzeria.executes()).toHaveLength(calls);

      const consumed = { status: 403, body: { error: { code: 'consumed', message: 'Confirmation token has already been used. Prepare a new token.' } } };
      expect(await agent.execute({ ...order, amount_cents: 1 }, token)).toMatchObject(consumed);
      expect(await agent.execute(order, token, 'echo')).toMatchObject(consumed);
      // Another agent holding the spent token learns nothing of its answer.
      expect(await other.execute(order, token)).toMatchObject({ status: 403, body: { error: { code: 'principal_mismatch', message: MISMATCH } } });
      expect(pizzeria.executes()).toHaveLength(calls);
    });

    it('keeps the stored answer unreadable without the token', async () => {
      const prepared = await agent.prepare(order);
      const token = prepared.body.confirmationToken as string;
      const first = await agent.execute(order, token);
      const row = await twokey.agp.tokens.find(sha256Hex(token), 'gateway');
      expect(row?.data).toMatchObject({ execution: { status: 'done', answer: { v: 1 } } });
      // The answer carries the business's order id: stored sealed, never as it was sent.
      expect(JSON.stringify(row?.data)).not.toContain(String(first.body.data.orderId));
    });

    it("refuses another agent's token, even for the very same request", async () => {
      const prepared = await agent.prepare(order);
      const stolen = await other.execute(order, prepared.body.confirmationToken);
      expect(stolen).toMatchObject({ status: 403, body: { error: { code: 'principal_mismatch', message: MISMATCH } } });
      expect(await agent.execute(order, prepared.body.confirmationToken)).toMatchObject({ status: 200 });
    });

    it('lets exactly one of two simultaneous executes spend a token', async () => {
      const prepared = await agent.prepare(order);
      const calls = pizzeria.executes().length;
      // The business holds its answer, so the two overlap for certain: once the first is done, the
      // same request under the same token replays its answer instead (a retry), which a fast
      // machine let the second one see now and then.
      const reached = pizzeria.hold();
      const both = [agent.execute(order, prepared.body.confirmationToken), agent.execute(order, prepared.body.confirmationToken)];
      try {
        await reached;
        const refused = await Promise.race(both);
        expect(refused).toMatchObject({ status: 403 });
      } finally {
        // Held answers would stall every later test's execute.
        pizzeria.release();
      }
      const results = await Promise.all(both);
      expect(results.map((result) => result.status).sort()).toEqual([200, 403]);
      expect(pizzeria.executes()).toHaveLength(calls + 1);
    });
  });

  describe('strict', () => {
    let twokey: AgpTwokey;
    let agent: ReturnType<typeof client>;

    beforeAll(async () => {
      // AGENR_MAX_EXECUTE_AMOUNT unset: the default ceiling of 100 cents.
      twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'strict' });
      agent = client(twokey, (await twokey.createAgent('argus')).apiKey);
    });
    afterAll(() => twokey.close());

    const withAmount = (amount: Record<string, unknown>) => ({ action: 'order', items: [{ productId: 'margherita', quantity: 1 }], ...amount });

    it('requires a token like confirm', async () => {
      expect(await agent.execute(withAmount({ amount_cents: 50 }))).toMatchObject({ status: 403, body: { error: { message: MISSING } } });
    });

    it.each([['amount_cents'], ['amount']])('accepts %s 100 and refuses 101', async (field) => {
      const atCeiling = withAmount({ [field]: 100 });
      const prepared = await agent.prepare(atCeiling);
      expect(await agent.execute(atCeiling, prepared.body.confirmationToken)).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });

      const over = withAmount({ [field]: 101 });
      const refusedPrepare = await agent.prepare(over);
      expect(refusedPrepare).toMatchObject({
        status: 403,
        body: { error: { code: 'operation_not_allowed', message: 'Execute amount exceeds policy limit (100 cents).' } },
      });
    });

    it('refuses 101 at execute too, with a valid token, without spending it', async () => {
      // A token prepared before the ceiling was lowered (or under confirm): written as prepare would have.
      const { apiKey, id } = await twokey.createAgent('late');
      const late = client(twokey, apiKey);
      const calls = pizzeria.executes().length;
      const over = withAmount({ amount: 101 });
      const token = mintConfirmToken();
      const now = new Date();
      await twokey.agp.tokens.insert({
        tokenHash: sha256Hex(token),
        kind: 'gateway',
        agentId: id,
        businessId: 'joes-pizza',
        requestHash: requestHash(over),
        proposalId: null,
        data: null,
        createdAt: now,
        expiresAt: new Date(now.getTime() + 60_000),
        consumedAt: null,
      });
      expect(await late.execute(over, token)).toMatchObject({
        status: 403,
        body: { error: { code: 'operation_not_allowed', message: 'Execute amount exceeds policy limit (100 cents).' } },
      });
      expect(pizzeria.executes()).toHaveLength(calls);
      expect((await twokey.agp.tokens.find(sha256Hex(token), 'gateway'))?.consumedAt).toBeNull();
    });

    it('counts the larger of amount_cents and amount', async () => {
      expect(await agent.prepare(withAmount({ amount_cents: 50, amount: 101 }))).toMatchObject({
        status: 403,
        body: { error: { message: 'Execute amount exceeds policy limit (100 cents).' } },
      });
      expect(await agent.prepare(withAmount({ amount: 'a lot' }))).toMatchObject({
        status: 403,
        body: { error: { message: 'Execute amount at /amount must be a non-negative integer number of cents.' } },
      });
    });
  });
});
