import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe.each(drivers)('agent API (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
  });
  afterAll(() => twokey.close());

  const proposalCount = async () => (await twokey.services.store.listProposals({ limit: 10_000 })).length;

  describe('happy path', () => {
    it('proposes, is approved, commits with the token, and reports the result', async () => {
      const params = { org: 'acme', plan: 'scale' };
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params } });
      expect(proposed.status).toBe(201);
      expect(proposed.body).toMatchObject({
        status: 'pending',
        operation: 'upgrade_plan',
        summary: 'argus is requesting to upgrade acme to the scale plan.',
        quorum: 1,
        approvals: [],
      });
      expect(proposed.body.id).toMatch(/^prp_/);
      expect(proposed.body.confirmToken).toMatch(/^tk_conf_[A-Za-z0-9_-]{43}$/);

      await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
      const committed = await twokey.request('POST', `/v1/proposals/${proposed.body.id}/commit`, {
        apiKey,
        headers: { 'x-confirmation-token': proposed.body.confirmToken },
        body: { operation: 'upgrade_plan', params },
      });
      expect(committed).toMatchObject({ status: 200, body: { status: 'committed', result: { echoed: true, params } } });

      const view = await twokey.request('GET', `/v1/proposals/${proposed.body.id}`, { apiKey });
      expect(view.body).toMatchObject({
        status: 'committed',
        approvals: [{ approver: 'web:alice' }],
        decision: { by: 'web:alice', reason: null },
        result: { echoed: true },
        error: null,
      });
      expect(JSON.stringify(view.body)).not.toContain('tk_conf_');

      const replay = await twokey.request('POST', `/v1/proposals/${proposed.body.id}/commit`, {
        apiKey,
        headers: { 'x-confirmation-token': proposed.body.confirmToken },
        body: { operation: 'upgrade_plan', params },
      });
      expect(replay).toMatchObject({ status: 200, headers: { 'idempotent-replayed': 'true' }, body: { ...committed.body, replayed: true } });
      expect(committed.body).not.toHaveProperty('replayed');
    });

    it('lists the operations the agent may propose, with their schemas', async () => {
      const { apiKey: limitedKey } = await twokey.createAgent('limited', { operations: ['delete_workspace'] });
      const all = await twokey.request('GET', '/v1/operations', { apiKey });
      expect(all.body.operations.map((op: { name: string }) => op.name)).toEqual(['upgrade_plan', 'delete_workspace']);
      const limited = await twokey.request('GET', '/v1/operations', { apiKey: limitedKey });
      expect(limited.body.operations).toHaveLength(1);
      expect(limited.body.operations[0].params.properties).toHaveProperty('workspace');
      const refused = await twokey.request('POST', '/v1/proposals', {
        apiKey: limitedKey,
        body: { operation: 'upgrade_plan', params: { org: 'a', plan: 'pro' } },
      });
      expect(refused).toMatchObject({ status: 403, body: { error: { code: 'operation_not_allowed' } } });
    });

    it('lets the agent cancel a pending proposal, once', async () => {
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'w1' } } });
      const cancelled = await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
      expect(cancelled).toMatchObject({ status: 200, body: { status: 'cancelled', decision: { by: 'agent:argus' } } });
      const again = await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
      expect(again).toMatchObject({ status: 409, body: { error: { code: 'not_pending' } } });
    });
  });

  describe('bad input gets a 4xx naming the problem and stores nothing', () => {
    const cases: Array<{ name: string; send: () => Promise<{ status: number; body: any }>; status: number; code: string; mentions: string }> = [
      {
        name: 'malformed JSON',
        send: () =>
          twokey.app
            .inject({
              method: 'POST',
              url: '/v1/proposals',
              headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
              payload: '{"operation": ',
            })
            .then((r) => ({ status: r.statusCode, body: r.json() })),
        status: 400,
        code: 'invalid_json',
        mentions: 'JSON',
      },
      {
        name: 'a wrong type in params',
        send: () => twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 42, plan: 'scale' } } }),
        status: 400,
        code: 'invalid_params',
        mentions: 'upgrade_plan',
      },
      {
        name: 'an unknown operation',
        send: () => twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'launch_missiles', params: {} } }),
        status: 404,
        code: 'unknown_operation',
        mentions: 'launch_missiles',
      },
      {
        name: 'an extra property in params',
        send: () => twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'a', plan: 'pro', seats: 5 } } }),
        status: 400,
        code: 'invalid_params',
        mentions: 'params',
      },
      {
        name: 'an extra property in the body',
        send: () =>
          twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'a', plan: 'pro' }, summary: 'trust me' } }),
        status: 400,
        code: 'invalid_request',
        mentions: 'summary',
      },
      {
        name: 'a 1 MB body',
        send: () =>
          twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'x'.repeat(1024 * 1024), plan: 'pro' } } }),
        status: 413,
        code: 'payload_too_large',
        mentions: 'too large',
      },
      {
        name: 'no API key',
        send: () => twokey.request('POST', '/v1/proposals', { body: { operation: 'upgrade_plan', params: { org: 'a', plan: 'pro' } } }),
        status: 401,
        code: 'unauthorized',
        mentions: 'Authorization',
      },
      {
        name: 'an unknown API key',
        send: () =>
          twokey.request('POST', '/v1/proposals', {
            apiKey: 'tk_agent_' + 'x'.repeat(43),
            body: { operation: 'upgrade_plan', params: { org: 'a', plan: 'pro' } },
          }),
        status: 401,
        code: 'unauthorized',
        mentions: 'unknown API key',
      },
      {
        name: 'a token in the query string',
        send: () => twokey.request('GET', `/v1/operations?token=tk_conf_${'A'.repeat(43)}`, { apiKey }),
        status: 400,
        code: 'invalid_request',
        mentions: 'URL',
      },
    ];

    it.each(cases)('$name → $status $code', async ({ send, status, code, mentions }) => {
      const before = await proposalCount();
      const response = await send();
      expect(response.status).toBe(status);
      expect(response.body.error.code).toBe(code);
      expect(response.body.error.message).toContain(mentions);
      expect(response.body.error.requestId).toMatch(/^req_/);
      expect(await proposalCount()).toBe(before);
    });

    it('refuses a long-poll longer than 60 s or not a number, naming the parameter', async () => {
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'poll' } } });
      for (const wait of ['61', 'abc', '-1']) {
        const response = await twokey.request('GET', `/v1/proposals/${proposed.body.id}?wait=${wait}`, { apiKey });
        expect(response.status, `wait=${wait}`).toBe(400);
        expect(response.body.error.message).toContain('wait');
      }
      const immediate = await twokey.request('GET', `/v1/proposals/${proposed.body.id}?wait=0`, { apiKey });
      expect(immediate).toMatchObject({ status: 200, body: { status: 'pending' } });
    });

    it('lists every schema error of the params', async () => {
      const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { plan: 'gold', extra: true } } });
      expect(response.status).toBe(400);
      const paths = response.body.error.details.map((d: { path: string }) => d.path).sort();
      expect(paths.length).toBeGreaterThanOrEqual(3);
      expect(JSON.stringify(response.body.error.details)).toMatch(/org/);
      expect(JSON.stringify(response.body.error.details)).toMatch(/plan/);
      expect(JSON.stringify(response.body.error.details)).toMatch(/extra/);
    });

    it('refuses a revoked key, saying it was revoked', async () => {
      const { apiKey: doomed } = await twokey.createAgent('doomed');
      await twokey.services.agents.revoke('doomed');
      const response = await twokey.request('GET', '/v1/operations', { apiKey: doomed });
      expect(response).toMatchObject({ status: 401, body: { error: { code: 'unauthorized', message: expect.stringContaining('revoked') } } });
    });

    it("answers 404 for another agent's proposal", async () => {
      const { apiKey: otherKey } = await twokey.createAgent('nosy');
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'w2' } } });
      const peek = await twokey.request('GET', `/v1/proposals/${proposed.body.id}`, { apiKey: otherKey });
      expect(peek).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    });
  });

  it('rate-limits per API key', async () => {
    const limited = await startTestTwokey({ driver, rateLimit: { max: 3, timeWindowMs: 60_000 } });
    try {
      const { apiKey: first } = await limited.createAgent('first');
      const { apiKey: second } = await limited.createAgent('second');
      const statuses = [];
      for (let i = 0; i < 4; i += 1) statuses.push((await limited.request('GET', '/v1/operations', { apiKey: first })).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect((await limited.request('GET', '/v1/operations', { apiKey: second })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('logs of a whole propose → approve → commit hold no token and no API key', async () => {
    twokey.logs.length = 0;
    const params = { org: 'globex', plan: 'pro' };
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params } });
    await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:bob', via: 'test' });
    await twokey.request('POST', `/v1/proposals/${proposed.body.id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': proposed.body.confirmToken },
      body: { operation: 'upgrade_plan', params },
    });
    await twokey.request('GET', `/v1/operations?t=${proposed.body.confirmToken}`, { apiKey });
    const logs = twokey.logs.join('');
    expect(logs).toContain(proposed.body.id);
    expect(logs).not.toContain(proposed.body.confirmToken);
    expect(logs).not.toContain(apiKey);
    expect(logs).not.toMatch(/tk_(conf|agent)_[A-Za-z0-9_-]{8}/);
  });

  it('exposes Prometheus metrics: proposals by status, outbox depth, executor latency', async () => {
    const response = await twokey.app.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toContain('text/plain');
    expect(response.body).toMatch(/twokey_proposals\{status="committed"\} [1-9]/);
    expect(response.body).toMatch(/twokey_outbox_jobs\{status="dead"\} 0/);
    expect(response.body).toMatch(/twokey_executor_seconds_count\{operation="upgrade_plan",outcome="ok"\} [1-9]/);
    expect(response.body).toMatch(/twokey_decision_seconds_count\{decision="approved",operation="[a-z_]+"\} [1-9]/);
  });

  it('answers health and readiness', async () => {
    expect(await twokey.request('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await twokey.request('GET', '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
  });
});
