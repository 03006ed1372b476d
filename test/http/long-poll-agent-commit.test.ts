import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

// An approved `commit: agent` proposal changes only when its agent commits, so a long-poll on it
// answers at once. Were it held, this 60 s wait would outlast the test's own 30 s timeout and fail it.
describe.each(drivers)('long-poll on a proposal waiting for its agent (%s)', (driver) => {
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver });
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
});
