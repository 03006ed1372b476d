import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFailedAuthLimiter, createLongPollLimiter } from '../../src/limits/index.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, refundOperation, upgradePlanOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe('the limiters', () => {
  it('hands out long-poll slots up to the limit, and each slot back once', () => {
    const limiter = createLongPollLimiter(2);
    const first = limiter.enter('agt_a');
    const second = limiter.enter('agt_a');
    expect(first).not.toBeNull();
    expect(limiter.enter('agt_a')).toBeNull();
    expect(limiter.enter('agt_b')).not.toBeNull();
    first?.();
    first?.();
    expect(limiter.enter('agt_a')).not.toBeNull();
    expect(limiter.enter('agt_a')).toBeNull();
    second?.();
  });

  it('counts refused keys per address and per failing key prefix, in one-minute windows', () => {
    const clock = manualClock();
    const limiter = createFailedAuthLimiter({ max: 2, windowMs: 60_000, clock });
    const from = (ip: string) => ({ ip, url: '/v1/operations' });
    expect(limiter.recordFailure(from('10.0.0.1'), 'tk_agent_AAAAwrong1')).toBeNull();
    expect(limiter.recordFailure(from('10.0.0.1'), 'tk_agent_BBBBwrong2')).toBeNull();
    // The third refusal from the address is over its limit; the window ends in a minute.
    expect(limiter.recordFailure(from('10.0.0.1'), 'tk_agent_CCCCwrong3')).toMatchObject({
      retryAfterSeconds: 60,
      error: { code: 'rate_limited', message: expect.stringContaining('too many failed authentications') },
    });
    // Another address is counted apart, but one key prefix is counted whatever the address.
    expect(limiter.recordFailure(from('10.0.0.2'), 'tk_agent_AAAAwrong1')).toBeNull();
    expect(limiter.recordFailure(from('10.0.0.3'), 'tk_agent_AAAAwrong1')).toMatchObject({ error: { code: 'rate_limited' } });
    clock.advance(45_000);
    expect(limiter.recordFailure(from('10.0.0.1'), null)).toMatchObject({ retryAfterSeconds: 15 });
    clock.advance(15_000);
    expect(limiter.recordFailure(from('10.0.0.1'), null)).toBeNull();
  });

  it('keeps counting an address that sprays more distinct keys than the table holds', () => {
    const clock = manualClock();
    const limiter = createFailedAuthLimiter({ max: 2, windowMs: 60_000, clock });
    const attacker = { ip: '198.51.100.66', url: '/v1/operations' };
    for (let n = 0; n < 3; n += 1) limiter.recordFailure(attacker, null);
    // 10,001 different key prefixes fill the prefix table; the address's count must survive it.
    for (let n = 0; n <= 10_000; n += 1) limiter.recordFailure(attacker, `tk_agent_${n.toString(36).padStart(4, '0')}`);
    expect(limiter.recordFailure(attacker, 'tk_agent_zzzzfinal')).toMatchObject({ error: { code: 'rate_limited' } });
    // Once the windows end, the full table makes room again.
    clock.advance(60_000);
    expect(limiter.recordFailure({ ip: '198.51.100.67', url: '/v1/operations' }, 'tk_agent_zzzznext')).toBeNull();
    expect(limiter.recordFailure({ ip: '198.51.100.67', url: '/v1/operations' }, 'tk_agent_zzzznext')).toBeNull();
    expect(limiter.recordFailure({ ip: '198.51.100.67', url: '/v1/operations' }, 'tk_agent_zzzznext')).toMatchObject({ error: { code: 'rate_limited' } });
  });
});

describe.each(drivers)('resource limits over HTTP (%s)', (driver) => {
  const clock = manualClock();
  let twokey: TestTwokey;
  let apiKey: string;
  let otherKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({
      driver,
      clock,
      env: {
        TWOKEY_MAX_PENDING_PER_AGENT: '2',
        TWOKEY_MAX_LONG_POLLS_PER_AGENT: '1',
        TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: '3',
        TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES: '1024',
      },
    });
    ({ apiKey } = await twokey.createAgent('argus'));
    ({ apiKey: otherKey } = await twokey.createAgent('hermes'));
  });
  afterAll(() => twokey.close());
  // Each test starts with no pending proposal, whatever the one before left.
  afterEach(async () => {
    for (const proposal of await twokey.services.store.listProposals({ status: 'pending' })) {
      const agent = await twokey.services.store.getAgent(proposal.agentId);
      if (agent) await twokey.services.proposals.cancel(agent, proposal.id);
    }
  });

  const propose = (key: string, org = 'acme', headers: Record<string, string> = {}) =>
    twokey.request('POST', '/v1/proposals', { apiKey: key, body: { operation: 'upgrade_plan', params: { org, plan: 'pro' } }, headers });
  const cancel = (key: string, id: string) => twokey.request('POST', `/v1/proposals/${id}/cancel`, { apiKey: key });

  it('refuses a pending proposal past the per-agent limit with 429, for that agent only', async () => {
    const first = await propose(apiKey);
    const second = await propose(apiKey);
    expect([first.status, second.status]).toEqual([201, 201]);
    const third = await propose(apiKey);
    expect(third).toMatchObject({
      status: 429,
      body: { error: { code: 'rate_limited', message: expect.stringContaining('2 proposals waiting for a decision (the limit)') } },
    });
    expect((await propose(otherKey)).status).toBe(201);
    await cancel(apiKey, first.body.id);
    expect((await propose(apiKey)).status).toBe(201);
  });

  it('holds the per-agent limit when proposals arrive at once (counted under the agent row lock)', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => propose(apiKey, `burst-${i}`)));
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(2);
    expect(answers.filter((answer) => answer.status === 429)).toHaveLength(10);
    expect(await twokey.services.store.listProposals({ status: 'pending' })).toHaveLength(2);
  });

  it('refuses a long-poll past the per-agent limit with 429, and frees the slot when one answers', async () => {
    const a = await propose(apiKey, 'a');
    const b = await propose(apiKey, 'b');
    const poll = (id: string) => twokey.request('GET', `/v1/proposals/${id}?wait=60`, { apiKey });
    const polls = [poll(a.body.id), poll(b.body.id)];
    // Exactly one of the two holds the agent's single slot; the other is answered at once.
    const refused = await Promise.race(polls);
    expect(refused).toMatchObject({ status: 429, body: { error: { code: 'rate_limited', message: expect.stringContaining('1 open long-polls') } } });
    await cancel(apiKey, a.body.id);
    await cancel(apiKey, b.body.id);
    const answers = await Promise.all(polls);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 429]);

    const c = await propose(apiKey, 'c');
    const held = poll(c.body.id);
    await cancel(apiKey, c.body.id);
    expect(await held).toMatchObject({ status: 200, body: { status: 'cancelled' } });
  });

  it('does not keep a response above the size limit for replay: the key answers 409, or 422 for another request', async () => {
    const big = 'x'.repeat(1_500);
    const headers = { 'idempotency-key': 'big-response-1' };
    const first = await propose(apiKey, big, headers);
    expect(first.status).toBe(201);
    expect(await propose(apiKey, big, headers)).toMatchObject({
      status: 409,
      body: { error: { code: 'conflict', message: expect.stringContaining('larger than 1024 bytes') } },
    });
    expect(await propose(apiKey, 'other', headers)).toMatchObject({ status: 422, body: { error: { code: 'idempotency_key_reused' } } });
    await cancel(apiKey, first.body.id);
    // A small response is still replayed.
    const small = await propose(apiKey, 'small', { 'idempotency-key': 'small-response-1' });
    expect(await propose(apiKey, 'small', { 'idempotency-key': 'small-response-1' })).toMatchObject({ status: 201, body: { id: small.body.id } });
    await cancel(apiKey, small.body.id);
  });

  it('answers refused keys from an address past its limit with 429 and Retry-After, on /v1, /agp and /mcp alike', async () => {
    const guess = (url: string, attempt: number, method: 'GET' | 'POST' = 'GET') =>
      twokey.app.inject({ method, url, remoteAddress: '198.51.100.7', headers: { authorization: `Bearer tk_agent_guess${url}${attempt}` } });
    for (const [url, method] of [
      ['/v1/operations', 'GET'],
      ['/agp/discover', 'POST'],
      ['/mcp', 'POST'],
    ] as const) {
      for (let attempt = 0; attempt < 3; attempt += 1) expect((await guess(url, attempt, method)).statusCode).toBe(401);
      const limited = await guess(url, 3, method);
      expect(limited.statusCode).toBe(429);
      expect(limited.json()).toMatchObject({ error: { code: 'rate_limited', message: expect.stringContaining('too many failed authentications') } });
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      clock.advance(60_000);
      expect((await guess(url, 4, method)).statusCode).toBe(401);
      clock.advance(60_000);
    }
    // /mcp and the resume-state routes count refused keys too (before, /mcp never answered 429).
    for (let attempt = 0; attempt < 3; attempt += 1) await guess('/v1/proposals/prp_x/resume-state', attempt);
    expect((await guess('/v1/proposals/prp_x/resume-state', 3)).statusCode).toBe(429);
    clock.advance(60_000);
  });

  it("serves a valid key from an address that keeps failing: nobody is locked out by a neighbour's failures", async () => {
    const sharedAddress = '203.0.113.9';
    const send = (url: string, key: string, method: 'GET' | 'POST' = 'GET', payload?: object) =>
      twokey.app.inject({ method, url, remoteAddress: sharedAddress, headers: { authorization: `Bearer ${key}` }, ...(payload ? { payload } : {}) });
    for (let attempt = 0; attempt < 20; attempt += 1) await send('/v1/operations', `tk_agent_neighbour${attempt}`);
    expect((await send('/v1/operations', 'tk_agent_neighbour99')).statusCode).toBe(429);
    // The agents behind the same address (a proxy, a NAT) go on working, on every surface.
    expect((await send('/v1/operations', apiKey)).statusCode).toBe(200);
    expect((await send('/v1/operations', otherKey)).statusCode).toBe(200);
    expect((await send('/agp/discover', apiKey, 'POST', { businessId: 'echo' })).statusCode).toBe(200);
    // 405: through authentication to the route (a stateless server takes POST only).
    expect((await send('/mcp', apiKey)).statusCode).toBe(405);
    const proposed = await send('/v1/proposals', apiKey, 'POST', { operation: 'upgrade_plan', params: { org: 'neighbours', plan: 'pro' } });
    expect(proposed.statusCode).toBe(201);
    await cancel(apiKey, proposed.json().id);
    clock.advance(60_000);
  });

  it('counts one failing key across addresses, without holding back other keys from those addresses', async () => {
    const send = (key: string, remoteAddress: string) =>
      twokey.app.inject({ method: 'GET', url: '/v1/operations', remoteAddress, headers: { authorization: `Bearer ${key}` } });
    const stale = 'tk_agent_STALEkeyOfARevokedAgent';
    for (let n = 1; n <= 3; n += 1) expect((await send(stale, `192.0.2.${n}`)).statusCode).toBe(401);
    expect((await send(stale, '192.0.2.4')).statusCode).toBe(429);
    // A fresh address with another wrong key is only refused, not limited: the limit was the key's.
    expect((await send('tk_agent_OTHERwrongKey', '192.0.2.5')).statusCode).toBe(401);
    clock.advance(60_000);
  });

  it('counts refusals and 429s in the metrics', async () => {
    const value = async (pattern: RegExp) => Number(pattern.exec(await twokey.services.metrics.registry.metrics())?.[1] ?? 0);
    const refusedOnMcp = /twokey_auth_refusals_total\{route="\/mcp",reason="unknown_key"\} (\d+)/;
    const limitedOnMcp = /twokey_rate_limit_refusals_total\{route="\/mcp",limit="failed_auth"\} (\d+)/;
    const before = await Promise.all([refusedOnMcp, limitedOnMcp].map(value));
    for (let attempt = 0; attempt < 5; attempt += 1) {
      await twokey.app.inject({ method: 'POST', url: '/mcp', remoteAddress: '198.51.100.99', headers: { authorization: `Bearer tk_agent_metric${attempt}` } });
    }
    expect(await Promise.all([refusedOnMcp, limitedOnMcp].map(value))).toEqual([before[0]! + 3, before[1]! + 2]);
    clock.advance(60_000);
  });
});

describe.each(drivers)('the client address behind a proxy (%s)', (driver) => {
  const clock = manualClock();
  const started: TestTwokey[] = [];
  afterAll(async () => {
    for (const twokey of started) await twokey.close();
  });
  const start = async (env: Record<string, string>) => {
    const twokey = await startTestTwokey({ driver, clock, env: { TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: '2', ...env } });
    started.push(twokey);
    return twokey;
  };
  /** Two refused keys from a client the proxy names, then a third refused key from another client. */
  const thirdRefusalFromAnotherClient = async (twokey: TestTwokey) => {
    const viaProxy = (key: string, client: string) =>
      twokey.app.inject({
        method: 'GET',
        url: '/v1/operations',
        remoteAddress: '127.0.0.1',
        headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': client },
      });
    await viaProxy('tk_agent_AAAAfirst', '198.51.100.1');
    await viaProxy('tk_agent_BBBBsecond', '198.51.100.1');
    return (await viaProxy('tk_agent_CCCCthird', '198.51.100.2')).statusCode;
  };

  it('ignores X-Forwarded-For by default: everyone behind the proxy shares its address', async () => {
    expect(await thirdRefusalFromAnotherClient(await start({}))).toBe(429);
  });

  it('with TWOKEY_TRUST_PROXY naming the proxy, counts each client the proxy names apart', async () => {
    expect(await thirdRefusalFromAnotherClient(await start({ TWOKEY_TRUST_PROXY: '127.0.0.1' }))).toBe(401);
  });
});

describe.each(drivers)('the pending limit and proposals a rule decides at once (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({
      driver,
      env: { TWOKEY_MAX_PENDING_PER_AGENT: '1' },
      configYaml: configYaml([
        upgradePlanOperation({ approvers: ['web:alice'], quorum: 1, commit: 'agent' }),
        refundOperation({
          customer: true,
          policy: [{ when: 'params.amount_cents <= 2000', decide: 'approve', reason: 'small refunds are automatic' }],
          approvers: ['web:alice'],
          commit: 'on_approve',
        }),
      ]),
    });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(() => twokey.close());

  const refund = (amount: number) =>
    twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { customer: 'c1', amount_cents: amount } } });

  it('an agent at its limit of waiting proposals still gets a rule-approved call through, but not one that would wait', async () => {
    const waiting = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } } });
    expect(waiting.status).toBe(201);
    // A rule decides it at once: it never waits for anyone, so the limit of waiting proposals does not refuse it.
    const automatic = await refund(1500);
    expect(automatic).toMatchObject({ status: 201, body: { status: 'committed' } });
    // The same operation above the rule's bound waits for a person: refused at the limit, as before.
    expect(await refund(5000)).toMatchObject({ status: 429, body: { error: { code: 'rate_limited' } } });
  });
});
