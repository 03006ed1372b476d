import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const SECRET = 'downstream-secret-0123456789';

const config = (url: string) => `
operations:
  - name: remove_member
    description: Remove a member
    params:
      type: object
      required: [org, member]
      properties:
        org: { type: string }
        member: { type: string }
    summary: "{{agent}} wants to remove {{params.member}} from {{params.org}}."
    approval: { approvers: [web:alice], quorum: 1 }
    commit: agent
    executor: { type: http, url: "${url}/remove", secret: "${SECRET}", timeout: 5s }
`;

describe.each(drivers)('HTTP executor (%s)', (driver) => {
  let downstream: FakeDownstream;
  let twokey: TestTwokey;
  let apiKey: string;

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    twokey = await startTestTwokey({ driver, configYaml: config(downstream.url) });
    ({ apiKey } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey.close();
    await downstream.close();
  });

  const params = { org: 'acme', member: 'bob@acme.test' };
  async function approvedProposal() {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'remove_member', params } });
    await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
    return proposed.body as { id: string; confirmToken: string };
  }
  const commit = (proposal: { id: string; confirmToken: string }) =>
    twokey.request('POST', `/v1/proposals/${proposal.id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': proposal.confirmToken },
      body: { operation: 'remove_member', params },
    });

  it('POSTs the approved proposal, signed, with the proposal id as Idempotency-Key, and records the result', async () => {
    downstream.setBehaviour('ok');
    const proposal = await approvedProposal();
    const arrived = downstream.nextRequest();
    const committed = await commit(proposal);
    expect(committed).toMatchObject({ status: 200, body: { status: 'committed', result: { applied: true, key: proposal.id } } });
    const request = await arrived;
    expect(request.signatureValid).toBe(true);
    expect(request.idempotencyKey).toBe(proposal.id);
    expect(request.body).toMatchObject({ proposalId: proposal.id, operation: 'remove_member', params, agent: 'argus', approvedBy: ['web:alice'] });
    expect(typeof request.body.approvedAt).toBe('string');
    expect(JSON.stringify(request)).not.toContain(proposal.confirmToken);
  });

  it('executor 500: the token stays unconsumed, the proposal is approved with the error, a retry commits with the same key', async () => {
    downstream.setBehaviour('fail');
    const proposal = await approvedProposal();
    const failed = await commit(proposal);
    expect(failed).toMatchObject({ status: 502, body: { error: { code: 'execution_failed', message: expect.stringContaining('HTTP 500') } } });
    expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'approved', consumedAt: null, error: expect.stringContaining('500') });

    downstream.setBehaviour('ok');
    expect(await commit(proposal)).toMatchObject({ status: 200, body: { status: 'committed' } });
    const keys = downstream.requests.filter((r) => r.body.proposalId === proposal.id).map((r) => r.idempotencyKey);
    expect(keys).toEqual([proposal.id, proposal.id]);
    expect(downstream.effects.get(proposal.id)?.count).toBe(1);
    expect(await commit(proposal)).toMatchObject({ status: 200, body: { status: 'committed', replayed: true } });
    expect(downstream.requests.filter((r) => r.body.proposalId === proposal.id)).toHaveLength(2);
  });

  it('executor timeout: likewise unconsumed and retryable', async () => {
    downstream.setBehaviour('hang');
    const proposal = await approvedProposal();
    // A hanging executor is cut off by twokey's own deadline (the message says so), not by this test's timeout.
    const failed = await commit(proposal);
    expect(failed.body.error).toMatchObject({ code: 'execution_failed', message: expect.stringContaining('timed out') });
    expect(await twokey.services.proposals.get(proposal.id)).toMatchObject({ status: 'approved', consumedAt: null });
    downstream.releaseHanging();
    downstream.setBehaviour('ok');
    expect(await commit(proposal)).toMatchObject({ status: 200, body: { status: 'committed' } });
  });

  it('an operator retry (CLI) re-runs a failed execution', async () => {
    downstream.setBehaviour('fail');
    const proposal = await approvedProposal();
    await commit(proposal);
    downstream.setBehaviour('ok');
    const retried = await twokey.services.proposals.retry(proposal.id, { identity: 'web:alice', via: 'cli' });
    expect(retried).toMatchObject({ status: 'committed', error: null });
  });
});
