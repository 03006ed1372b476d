import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFailedAuthLimiter, createLongPollLimiter } from '../../src/limits/index.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
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

  it('counts failed authentications per address in one-minute windows', () => {
    const clock = manualClock();
    const limiter = createFailedAuthLimiter({ max: 2, windowMs: 60_000, clock });
    const from = (ip: string) => ({ ip });
    limiter.recordFailure(from('10.0.0.1'));
    limiter.recordFailure(from('10.0.0.1'));
    expect(() => limiter.check(from('10.0.0.1'))).toThrow(/too many failed authentications/);
    expect(() => limiter.check(from('10.0.0.2'))).not.toThrow();
    clock.advance(60_000);
    expect(() => limiter.check(from('10.0.0.1'))).not.toThrow();
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

  it('refuses an address that failed authentication too often, on /v1 and /agp, until the minute is over', async () => {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      expect((await twokey.request('GET', '/v1/operations', { apiKey: `tk_agent_guess${attempt}` })).status).toBe(401);
    }
    expect(await twokey.request('GET', '/v1/operations', { apiKey: 'tk_agent_guess4' })).toMatchObject({
      status: 429,
      body: { error: { code: 'rate_limited', message: expect.stringContaining('too many failed authentications') } },
    });
    // Even the right key waits: the address, not the key, is what is limited.
    expect((await twokey.request('GET', '/v1/operations', { apiKey })).status).toBe(429);
    expect((await twokey.request('POST', '/agp/discover', { apiKey, body: { businessId: 'echo' } })).status).toBe(429);
    clock.advance(60_000);
    expect((await twokey.request('GET', '/v1/operations', { apiKey })).status).toBe(200);
  });
});
