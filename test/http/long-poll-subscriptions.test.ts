import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

// Each turn of a long-poll subscribes to the proposal's changes before it re-reads the proposal. The
// turn that answers must end the subscription it made for a next turn; otherwise every answered
// long-poll leaves a listener and a timer behind until its interval runs out.
describe.each(drivers)('long-poll subscriptions (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, longPollIntervalMs: 60_000, listen: true });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(() => twokey.close());

  it('leaves no subscription behind once a change has answered the long-poll', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } } });
    const id = proposed.body.id as string;
    const polled = twokey.request('GET', `/v1/proposals/${id}?wait=30`, { apiKey });
    await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));

    await twokey.services.proposals.reject(id, { identity: 'web:alice', via: 'test' }, 'not now');
    expect((await polled).body).toMatchObject({ id, status: 'rejected' });
    expect(twokey.services.changes.watchers(id)).toBe(0);
  });

  it('leaves none behind when the client goes away first', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'globex', plan: 'pro' } } });
    expect(proposed.status).toBe(201);
    const id = proposed.body.id as string;
    const gone = new AbortController();
    const polled = fetch(`${twokey.url ?? ''}/v1/proposals/${id}?wait=30`, { headers: { authorization: `Bearer ${apiKey}` }, signal: gone.signal }).catch(
      (error: unknown) => error,
    );
    await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));
    gone.abort();
    await polled;
    await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(0));
  });
});
