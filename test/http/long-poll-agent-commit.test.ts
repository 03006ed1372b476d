import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Twokey } from '@twokey/client';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

// An approved `commit: agent` proposal changes only when its agent commits, so a long-poll on it
// answers at once. Were it held, this 60 s wait would outlast the test's own 30 s timeout and fail it.
describe.each(drivers)('long-poll on a proposal waiting for its agent (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, listen: true });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(() => twokey.close());

  it('answers an approved commit: agent proposal at once, with its decision', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } } });
    expect(proposed.status).toBe(201);
    await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
    const polled = await twokey.request('GET', `/v1/proposals/${proposed.body.id}?wait=60`, { apiKey });
    expect(polled.body).toMatchObject({ status: 'approved', approvals: [{ approver: 'web:alice' }] });
  });

  // `seen` closes the race for every state: the client says what it has, the server answers when the
  // proposal differs from it, and holds it while it does not (so a client waiting for `committed` on
  // an approved `commit: agent` proposal is not answered in a loop).
  describe('with seen', () => {
    const params = { org: 'initech', plan: 'pro' };
    const propose = async () => {
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params } });
      await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
      return { id: proposed.body.id as string, token: proposed.body.confirmToken as string };
    };

    it('answers at once when the proposal differs from what the client saw', async () => {
      const { id } = await propose();
      const polled = await twokey.request('GET', `/v1/proposals/${id}?wait=60&seen=pending:0`, { apiKey });
      expect(polled.body).toMatchObject({ status: 'approved' });
    });

    it('holds an approved proposal the client has already seen until its agent commits', async () => {
      const { id, token } = await propose();
      const polled = twokey.request('GET', `/v1/proposals/${id}?wait=30&seen=approved:1`, { apiKey });
      await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));
      const committed = await twokey.request('POST', `/v1/proposals/${id}/commit`, {
        apiKey,
        headers: { 'x-confirmation-token': token },
        body: { operation: 'upgrade_plan', params },
      });
      expect(committed.status).toBe(200);
      expect((await polled).body).toMatchObject({ status: 'committed' });
    });

    it("lets the SDK wait for the agent's own commit without asking again and again", async () => {
      const { id, token } = await propose();
      let calls = 0;
      const client = new Twokey({
        baseUrl: twokey.url ?? '',
        apiKey,
        fetch: (input, init) => {
          calls += 1;
          return fetch(input, init);
        },
      });
      const waited = client.wait(id, { until: (view) => view.status === 'committed', timeoutMs: 25_000 });
      await vi.waitFor(() => expect(twokey.services.changes.watchers(id)).toBe(1));
      expect(calls).toBe(2); // the first read, then one long-poll that is held
      await twokey.request('POST', `/v1/proposals/${id}/commit`, {
        apiKey,
        headers: { 'x-confirmation-token': token },
        body: { operation: 'upgrade_plan', params },
      });
      expect(await waited).toMatchObject({ status: 'committed' });
      expect(calls).toBe(2);
    });

    it('refuses a malformed seen with 400, naming it', async () => {
      const { id } = await propose();
      const polled = await twokey.request('GET', `/v1/proposals/${id}?wait=1&seen=approved`, { apiKey });
      expect(polled.status).toBe(400);
      expect(JSON.stringify(polled.body)).toContain('seen');
    });
  });
});
