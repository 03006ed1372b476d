import { sql } from 'drizzle-orm';
import fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotencyStore } from '../../src/db/agp-store.js';
import { idempotencyKeys } from '../../src/db/schema.js';
import { applyIdempotency, createIdempotency, idempotencyRequestHash } from '../../src/idempotency/index.js';
import { sha256Hex } from '../../src/core/secrets.js';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { startFakePizzeria, type FakePizzeria } from '../agp/fake-business.js';
import { startAgpTwokey, type AgpTwokey } from '../agp/support.js';
import { openExecuteRecord } from './records.js';

const order = { action: 'order', items: [{ productId: 'pepperoni', quantity: 1 }], amount_cents: 1499 };

describe.each(drivers)('Idempotency-Key (%s)', (driver) => {
  let pizzeria: FakePizzeria;
  let twokey: AgpTwokey;
  let apiKey: string;
  const clock = manualClock();

  beforeAll(async () => {
    pizzeria = await startFakePizzeria();
    twokey = await startAgpTwokey({ driver, pizzeriaUrl: pizzeria.url, policy: 'open', clock });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey.close();
    await pizzeria.close();
  });

  const execute = (key: string, request: Record<string, unknown> = order, agentKey = apiKey) =>
    twokey.agpRequest('/agp/execute', { apiKey: agentKey, headers: { 'idempotency-key': key }, body: { businessId: 'joes-pizza', request } });

  describe('on /agp/execute', () => {
    it('replays the first response, status and body, without running anything again', async () => {
      const calls = pizzeria.executes().length;
      const first = await execute('order-pepperoni-abc123');
      const second = await execute('order-pepperoni-abc123');
      expect(first.status).toBe(200);
      expect(second).toMatchObject({ status: 200, body: first.body });
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(pizzeria.executes()).toHaveLength(calls + 1);
      // The business dedupes on a key derived from the agent's key, so it also sees one order.
      expect(pizzeria.executes().at(-1)?.headers['idempotency-key']).toMatch(/^agp_[0-9a-f]{40}$/);
    });

    it('refuses the same key for a different request with 422', async () => {
      await execute('order-422');
      const changed = await execute('order-422', { ...order, amount_cents: 1 });
      expect(changed).toMatchObject({ status: 422, body: { error: { code: 'idempotency_key_reused' } } });
      expect(changed.body.error.requestId).toMatch(/^req_/);
    });

    it('answers 409 while the first request is still running, then replays it', async () => {
      const started = pizzeria.hold();
      const calls = pizzeria.executes().length;
      const first = execute('order-slow');
      await started;
      const concurrent = await execute('order-slow');
      expect(concurrent).toMatchObject({ status: 409, body: { error: { code: 'conflict' } } });
      pizzeria.release();
      expect((await first).status).toBe(200);
      expect(await execute('order-slow')).toMatchObject({ status: 200, body: (await first).body });
      expect(pizzeria.executes()).toHaveLength(calls + 1);
    });

    it('scopes keys per agent', async () => {
      const { apiKey: otherKey } = await twokey.createAgent('hermes');
      const calls = pizzeria.executes().length;
      const mine = await execute('shared-key');
      const theirs = await execute('shared-key', { ...order, amount_cents: 5 }, otherKey);
      expect(theirs.status).toBe(200);
      expect(theirs.body.transactionId).not.toBe(mine.body.transactionId);
      expect(pizzeria.executes()).toHaveLength(calls + 2);
    });

    it('forgets a key after 24 hours', async () => {
      const first = await execute('order-daily');
      clock.advance(24 * 3_600_000 - 1);
      expect((await execute('order-daily')).headers['idempotent-replayed']).toBe('true');
      clock.advance(1);
      const later = await execute('order-daily');
      expect(later.status).toBe(200);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect(later.body.transactionId).not.toBe(first.body.transactionId);
      expect(await twokey.idempotency.sweep()).toBeGreaterThan(0);
    });

    it('keeps no refusal: a retry with the same key gets the answer of the moment', async () => {
      const refused = await twokey.agpRequest('/agp/execute', {
        apiKey,
        headers: { 'idempotency-key': 'order-unknown-then-known' },
        body: { businessId: 'nowhere', request: order },
      });
      expect(refused.status).toBe(404);
      const calls = pizzeria.executes().length;
      pizzeria.failExecutes(true);
      expect((await execute('order-flaky')).status).toBe(502);
      pizzeria.failExecutes(false);
      const retried = await execute('order-flaky');
      expect(retried).toMatchObject({ status: 200, body: { data: { status: 'completed' } } });
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      expect(pizzeria.executes()).toHaveLength(calls + 2);
    });

    it('refuses a malformed key', async () => {
      expect(await execute('x'.repeat(256))).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
      expect(await execute('has space')).toMatchObject({ status: 400 });
    });
  });

  describe('on the POSTs of /v1', () => {
    const propose = (key: string, params: Record<string, unknown> = { org: 'acme', plan: 'pro' }) =>
      twokey.agpRequest('/v1/proposals', { apiKey, headers: { 'idempotency-key': key }, body: { operation: 'upgrade_plan', params } });

    it('replays a proposal, token included, and stores no token in the clear', async () => {
      const before = (await twokey.services.store.listProposals({ limit: 1000 })).length;
      const first = await propose('propose-1');
      const again = await propose('propose-1');
      expect(first.status).toBe(201);
      expect(again).toMatchObject({ status: 201, body: { id: first.body.id, confirmToken: first.body.confirmToken } });
      expect((await twokey.services.store.listProposals({ limit: 1000 })).length).toBe(before + 1);

      const rows = await twokey.services.database.db.select({ body: idempotencyKeys.responseBody }).from(idempotencyKeys);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) expect(row.body).toMatchObject({ v: 2, iv: expect.any(String), tag: expect.any(String), data: expect.any(String) });
      const stored = JSON.stringify(rows);
      expect(stored).not.toContain(first.body.confirmToken);
      expect(stored).not.toContain(first.body.id);
    });

    it('refuses a different proposal under the same key', async () => {
      await propose('propose-2');
      expect(await propose('propose-2', { org: 'acme', plan: 'scale' })).toMatchObject({ status: 422 });
    });

    it('replays a commit and a cancel', async () => {
      const proposed = await propose('propose-3');
      await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'cli' });
      const commit = () =>
        twokey.agpRequest(`/v1/proposals/${proposed.body.id}/commit`, {
          apiKey,
          headers: { 'idempotency-key': 'commit-3', 'x-confirmation-token': proposed.body.confirmToken },
          body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } },
        });
      const committed = await commit();
      expect(committed).toMatchObject({ status: 200, body: { status: 'committed' } });
      // Without the key this would be 403 consumed; with it, the first answer.
      expect(await commit()).toMatchObject({ status: 200, body: committed.body, headers: { 'idempotent-replayed': 'true' } });

      const pending = await propose('propose-4');
      const cancel = () => twokey.agpRequest(`/v1/proposals/${pending.body.id}/cancel`, { apiKey, headers: { 'idempotency-key': 'cancel-4' } });
      expect((await cancel()).body.status).toBe('cancelled');
      expect(await cancel()).toMatchObject({ status: 200, body: { status: 'cancelled' }, headers: { 'idempotent-replayed': 'true' } });
    });

    it("writes an open execute's record with the key's outcome, whether the key is completed or freed", async () => {
      const agent = await twokey.services.store.findAgentByName('argus');
      const agentId = agent?.id ?? '';
      const store = createIdempotencyStore(twokey.services.database.db);
      const now = clock();
      const expiresAt = new Date(now.getTime() + 86_400_000);
      const record = (transactionId: string) => openExecuteRecord({ agentId, agentName: 'argus', transactionId, at: now, expiresAt });
      const recorded = async (transactionId: string) => ({
        token: (await twokey.agp.tokens.find(sha256Hex(transactionId), 'adapter'))?.data,
        audit: (await twokey.services.store.listAudit({ limit: 10_000 })).filter((event) => event.data['transactionId'] === transactionId).length,
      });

      for (const key of ['attached-done', 'attached-freed']) {
        expect(await store.acquire({ agentId, key, requestHash: 'h', createdAt: now, expiresAt }, now)).toBe(true);
      }
      await store.complete(agentId, 'attached-done', now, 200, { sealed: true }, record('txn_done'));
      expect(await store.get(agentId, 'attached-done')).toMatchObject({ status: 'done', responseStatus: 200, responseBody: { sealed: true } });
      expect(await recorded('txn_done')).toEqual({ token: { transactionId: 'txn_done' }, audit: 1 });

      // An answer that failed after the work (its serialization, say): no answer kept, the work still recorded.
      await store.release(agentId, 'attached-freed', now, record('txn_freed'));
      expect(await store.get(agentId, 'attached-freed')).toBeNull();
      expect(await recorded('txn_freed')).toEqual({ token: { transactionId: 'txn_freed' }, audit: 1 });
    });

    it("lets no answer out, whatever its status, when the record attached to the key's outcome could not be written", async () => {
      const agentId = (await twokey.services.store.findAgentByName('argus'))?.id ?? '';
      const { db } = twokey.services.database;
      const store = createIdempotencyStore(db);
      const idempotency = createIdempotency({ store, clock, principal: () => ({ id: agentId, secret: 'tk_agent_secret' }) });
      const app = fastify();
      applyIdempotency(app, idempotency, () => true);
      // Work happened (its record attached), then the handler answers with a failure of its own.
      app.post('/work', async (request, reply) => {
        idempotency.attach(request, {
          event: { type: 'agp.executed', actor: 'agent:argus', agentId, data: { transactionId: 'txn_unrecorded' } },
          at: clock(),
          minted: [],
        });
        return reply.code(502).send({ error: 'the business said no' });
      });
      const recorded = async () =>
        (await twokey.services.store.listAudit({ limit: 10_000 })).filter((event) => event.data['transactionId'] === 'txn_unrecorded').length;
      // A real refusal by the database of the statement that frees the key and writes the record.
      await db.execute(sql`create function refuse_key_release() returns trigger language plpgsql as $$ begin raise exception 'refused'; end $$`);
      await db.execute(sql`create trigger refuse_key_release before delete on idempotency_keys for each row execute function refuse_key_release()`);
      try {
        const answer = await app.inject({ method: 'POST', url: '/work', headers: { 'idempotency-key': 'unrecorded-1' }, payload: {} });
        expect(answer.statusCode).toBeGreaterThanOrEqual(500);
        expect(answer.body).not.toContain('the business said no');
        expect(await recorded()).toBe(0);
      } finally {
        await db.execute(sql`drop trigger refuse_key_release on idempotency_keys`);
        await db.execute(sql`drop function refuse_key_release()`);
        await app.close();
      }
    });

    it('takes over the key of a request whose process died', async () => {
      const agent = await twokey.services.store.findAgentByName('argus');
      const params = { org: 'crashed', plan: 'pro' };
      const body = { operation: 'upgrade_plan', params };
      const requestHash = idempotencyRequestHash({ method: 'POST', url: '/v1/proposals', body });
      const now = clock();
      const store = createIdempotencyStore(twokey.services.database.db);
      expect(
        await store.acquire({ agentId: agent?.id ?? '', key: 'crashed-1', requestHash, createdAt: now, expiresAt: new Date(now.getTime() + 86_400_000) }, now),
      ).toBe(true);

      expect(await propose('crashed-1', params)).toMatchObject({ status: 409 });
      clock.advance(2 * 60_000);
      expect(await propose('crashed-1', params)).toMatchObject({ status: 201 });
    });
  });
});
