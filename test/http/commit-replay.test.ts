import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const SECRET = 'downstream-secret-replay-0123456789';

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

/**
 * The agent's side of a commit that happened while the agent could not hear the answer: its
 * connection died mid-commit, or the process that ran it died before it recorded the
 * Idempotency-Key's answer. Asking again must get what happened, not `403 consumed`.
 */
describe.each(drivers)('a retried commit that had succeeded (%s)', (driver) => {
  const clock = manualClock(new Date());
  let downstream: FakeDownstream;
  let twokey: TestTwokey;
  let apiKey: string;
  let agentId: string;
  const params = { org: 'acme', member: 'bob@acme.test' };
  const body = { operation: 'remove_member', params };

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    twokey = await startTestTwokey({ driver, configYaml: config(downstream.url), listen: true, clock });
    ({ apiKey, id: agentId } = await twokey.createAgent('argus'));
  });
  afterAll(async () => {
    await twokey.close();
    await downstream.close();
  });

  async function approvedProposal() {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body });
    await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
    return proposed.body as { id: string; confirmToken: string };
  }

  const commitOverTcp = (proposal: { id: string; confirmToken: string }, signal?: AbortSignal) =>
    fetch(`${twokey.url}/v1/proposals/${proposal.id}/commit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'x-confirmation-token': proposal.confirmToken, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });

  async function committed(id: string) {
    for (;;) {
      const proposal = await twokey.services.proposals.get(id);
      if (proposal.status === 'committed') return proposal;
      await new Promise((done) => setTimeout(done, 20));
    }
  }

  it('the connection died while the executor ran: the retry gets the stored result, and the downstream saw one request', async () => {
    downstream.setBehaviour('ok');
    const proposal = await approvedProposal();
    const hangUp = new AbortController();
    // The agent's connection drops while twokey is calling the downstream, before any answer.
    const arrived = downstream.nextRequest().then(() => hangUp.abort());
    await expect(commitOverTcp(proposal, hangUp.signal)).rejects.toThrow();
    await arrived;
    const stored = await committed(proposal.id);

    const retry = await commitOverTcp(proposal);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toMatchObject({
      status: 'committed',
      result: stored.result as object,
      replayed: true,
      outcome: { outcome: 'committed', userConsent: true, proposalId: proposal.id },
    });
    expect(downstream.requests.filter((request) => request.body.proposalId === proposal.id)).toHaveLength(1);
  });

  it('the process died before it stored the Idempotency-Key answer: once the key is taken over, the same key gets the result', async () => {
    downstream.setBehaviour('ok');
    const proposal = await approvedProposal();
    const url = `/v1/proposals/${proposal.id}/commit`;
    const commitWithKey = () =>
      twokey.request('POST', url, { apiKey, headers: { 'x-confirmation-token': proposal.confirmToken, 'idempotency-key': 'commit-once' }, body });
    const first = await commitWithKey();
    expect(first.status).toBe(200);
    // As a process killed between the commit and the key's record leaves it: in flight, with no answer.
    await twokey.services.database.db.execute(sql`
      update idempotency_keys set status = 'in_flight', response_status = null, response_body = null
       where agent_id = ${agentId} and key = 'commit-once'`);
    expect(await commitWithKey()).toMatchObject({ status: 409, body: { error: { code: 'conflict' } } });

    clock.advance(3 * 60_000);
    const retried = await commitWithKey();
    expect(retried).toMatchObject({ status: 200, body: { ...first.body, replayed: true } });
    expect(downstream.requests.filter((request) => request.body.proposalId === proposal.id)).toHaveLength(1);
    clock.advance(-3 * 60_000);
  });
});
