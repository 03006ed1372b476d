import { inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneExpired } from '../../src/db/retention.js';
import { requestIdentities } from '../../src/db/schema.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation, refundOperation, upgradePlanOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * `POST /v1/proposals` with `reuse: true`: the request identity (agent, operation, canonical params,
 * conversation) answers a repeated call with the request that still answers it, and a call after a
 * committed, seen one with a new request. What "still answers" means for each outcome is pinned here
 * with the clock moved by hand (docs/api.md, "One request per call").
 */
const identityConfig = configYaml([
  // commit: agent, one approver, 5 minutes.
  upgradePlanOperation({ approvers: ['web:alice'], quorum: 1, expiresIn: '5m', commit: 'agent' }),
  // commit: on_approve: the approval runs it.
  deleteWorkspaceOperation({ approvers: ['web:alice'], quorum: 1, expiresIn: '5m', commit: 'on_approve' }),
  // Small refunds are approved (and run) by a rule, at once.
  refundOperation({
    customer: true,
    approvers: ['web:alice'],
    expiresIn: '5m',
    commit: 'on_approve',
    policy: [{ when: 'params.amount_cents <= 100', decide: 'approve' }],
  }),
]);

const DAY = 24 * 3_600_000;

describe.each(drivers)('one request per call: POST /v1/proposals with reuse (%s)', (driver) => {
  const clock = manualClock();
  let twokey: TestTwokey;
  let apiKey: string;
  let otherKey: string;
  const alice = { identity: 'web:alice', via: 'test' };

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, configYaml: identityConfig, clock });
    ({ apiKey } = await twokey.createAgent('argus'));
    ({ apiKey: otherKey } = await twokey.createAgent('hermes'));
  });
  afterAll(() => twokey.close());

  const ask = (body: Record<string, unknown>, key = apiKey) => twokey.request('POST', '/v1/proposals', { apiKey: key, body: { reuse: true, ...body } });
  const read = (id: string) => twokey.request('GET', `/v1/proposals/${id}`, { apiKey });

  it('answers a repeat while the request is open with that request and its token (200), whatever the key order; other agents and conversations get their own', async () => {
    const first = await ask({ operation: 'upgrade_plan', params: { org: 'open-co', plan: 'pro' } });
    expect(first).toMatchObject({ status: 201, body: { status: 'pending', confirmToken: expect.stringMatching(/^tk_conf_/) } });
    const repeat = await ask({ operation: 'upgrade_plan', params: { plan: 'pro', org: 'open-co' } });
    expect(repeat).toMatchObject({
      status: 200,
      body: { id: first.body.id, reused: true, status: 'pending', confirmToken: first.body.confirmToken, params: { org: 'open-co', plan: 'pro' } },
    });
    expect(repeat.body.outcome).toMatchObject({ outcome: 'pending', proposalId: first.body.id });

    const otherAgent = await ask({ operation: 'upgrade_plan', params: { org: 'open-co', plan: 'pro' } }, otherKey);
    const otherConversation = await ask({ operation: 'upgrade_plan', params: { org: 'open-co', plan: 'pro' }, conversation: 'chat-42' });
    const sameConversation = await ask({ operation: 'upgrade_plan', params: { org: 'open-co', plan: 'pro' }, conversation: 'chat-42' });
    expect([otherAgent.status, otherConversation.status, sameConversation.status]).toEqual([201, 201, 200]);
    expect(new Set([first.body.id, otherAgent.body.id, otherConversation.body.id]).size).toBe(3);
    expect(sameConversation.body.id).toBe(otherConversation.body.id);
    // Without reuse nothing changes: every POST is a new proposal.
    const plain = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'open-co', plan: 'pro' } } });
    expect(plain.status).toBe(201);
    expect(plain.body.id).not.toBe(first.body.id);
  });

  it('refuses a conversation without reuse, naming the field, and proposes nothing', async () => {
    const before = (await twokey.services.store.listProposals({ limit: 1000 })).length;
    const answer = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: { operation: 'upgrade_plan', params: { org: 'x', plan: 'pro' }, conversation: 'chat-1' },
    });
    expect(answer).toMatchObject({ status: 400, body: { error: { code: 'invalid_request', details: [{ path: '/conversation' }] } } });
    const control = await ask({ operation: 'upgrade_plan', params: { org: 'x', plan: 'pro' }, conversation: 'bad\nline' });
    expect(control.status).toBe(400);
    expect((await twokey.services.store.listProposals({ limit: 1000 })).length).toBe(before);
  });

  it('commit: on_approve: a committed request answers the repeat that raced it once, then the next call is a new request', async () => {
    const params = { workspace: 'raced' };
    const first = await ask({ operation: 'delete_workspace', params });
    await twokey.services.proposals.approve(first.body.id, alice);
    // Nobody has read the result yet: this is the call that was told to call again.
    const repeat = await ask({ operation: 'delete_workspace', params });
    expect(repeat).toMatchObject({ status: 200, body: { id: first.body.id, status: 'committed', outcome: { outcome: 'committed' } } });
    const next = await ask({ operation: 'delete_workspace', params });
    expect(next).toMatchObject({ status: 201, body: { status: 'pending' } });
    expect(next.body.id).not.toBe(first.body.id);

    // Seen through GET (the agent's wait) counts the same as seen through the repeat.
    await twokey.services.proposals.approve(next.body.id, alice);
    expect((await read(next.body.id)).body.status).toBe('committed');
    const third = await ask({ operation: 'delete_workspace', params });
    expect(third.status).toBe(201);
    expect(third.body.id).not.toBe(next.body.id);
  });

  it('commit: agent: an approved request answers with its token until the agent commits it; after that a call is a new request', async () => {
    const params = { org: 'agent-co', plan: 'scale' };
    const first = await ask({ operation: 'upgrade_plan', params });
    await twokey.services.proposals.approve(first.body.id, alice);
    const repeat = await ask({ operation: 'upgrade_plan', params });
    expect(repeat).toMatchObject({ status: 200, body: { id: first.body.id, status: 'approved', confirmToken: first.body.confirmToken } });
    // Another API key (another agent) can neither see it nor get its token.
    expect((await ask({ operation: 'upgrade_plan', params }, otherKey)).body.id).not.toBe(first.body.id);
    const committed = await twokey.request('POST', `/v1/proposals/${first.body.id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': repeat.body.confirmToken },
      body: { operation: 'upgrade_plan', params },
    });
    expect(committed).toMatchObject({ status: 200, body: { status: 'committed' } });
    expect((await ask({ operation: 'upgrade_plan', params })).status).toBe(201);
  });

  it('an approval that expired unused no longer answers: a new call is a new ask', async () => {
    const params = { org: 'lapsed-co', plan: 'pro' };
    const first = await ask({ operation: 'upgrade_plan', params });
    await twokey.services.proposals.approve(first.body.id, alice);
    clock.advance(5 * 60_000 - 1);
    expect((await ask({ operation: 'upgrade_plan', params })).body.id).toBe(first.body.id);
    clock.advance(1);
    const after = await ask({ operation: 'upgrade_plan', params });
    expect(after.status).toBe(201);
  });

  it('rejected: the repeat gets the denial, and so does every call until the request would have expired; then it is a new ask', async () => {
    const params = { workspace: 'denied' };
    const first = await ask({ operation: 'delete_workspace', params });
    await twokey.services.proposals.reject(first.body.id, alice, 'not this one');
    const repeat = await ask({ operation: 'delete_workspace', params });
    expect(repeat).toMatchObject({ status: 200, body: { id: first.body.id, outcome: { outcome: 'denied', reason: 'not this one' } } });
    // Seen, yet still the denial: a model that ignores "do not retry" cannot re-ask at once.
    clock.advance(5 * 60_000 - 1);
    expect((await ask({ operation: 'delete_workspace', params })).body.id).toBe(first.body.id);
    clock.advance(1);
    expect((await ask({ operation: 'delete_workspace', params })).status).toBe(201);
  });

  it('expired: the repeat learns that nobody decided (once); the call after that is a new ask', async () => {
    const params = { workspace: 'silence' };
    const first = await ask({ operation: 'delete_workspace', params });
    clock.advance(5 * 60_000);
    await twokey.services.proposals.expireDue();
    const repeat = await ask({ operation: 'delete_workspace', params });
    expect(repeat).toMatchObject({ status: 200, body: { id: first.body.id, outcome: { outcome: 'expired', userConsent: false } } });
    expect((await ask({ operation: 'delete_workspace', params })).status).toBe(201);
  });

  it('cancelled: never answers again', async () => {
    const params = { workspace: 'withdrawn' };
    const first = await ask({ operation: 'delete_workspace', params });
    expect((await twokey.request('POST', `/v1/proposals/${first.body.id}/cancel`, { apiKey })).status).toBe(200);
    expect((await ask({ operation: 'delete_workspace', params })).status).toBe(201);
  });

  it('a request a rule approved and ran at once is answered then: the same call again is a new request (and runs again)', async () => {
    const params = { customer: 'cus_1', amount_cents: 50 };
    const first = await ask({ operation: 'refund', params });
    expect(first).toMatchObject({ status: 201, body: { status: 'committed' } });
    const second = await ask({ operation: 'refund', params });
    expect(second).toMatchObject({ status: 201, body: { status: 'committed' } });
    expect(second.body.id).not.toBe(first.body.id);
  });

  it('twenty identical calls at once are one request', async () => {
    const params = { workspace: 'stampede' };
    const answers = await Promise.all(Array.from({ length: 20 }, () => ask({ operation: 'delete_workspace', params })));
    const seen = JSON.stringify(answers.map((answer) => [answer.status, answer.body.id ?? answer.body.error]));
    expect(new Set(answers.map((answer) => answer.body.id)).size, seen).toBe(1);
    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(1);
    const stored = (await twokey.services.store.listProposals({ operation: 'delete_workspace', limit: 1000 })).filter(
      (proposal) => proposal.params['workspace'] === 'stampede',
    );
    expect(stored).toHaveLength(1);
  });
  // Last: it moves the clock a day on.
  it('forgets an identity a day after its request closed and expired, never while the request is open', async () => {
    const closed = await ask({ operation: 'delete_workspace', params: { workspace: 'pruned' } });
    await twokey.services.proposals.approve(closed.body.id, alice);
    expect((await read(closed.body.id)).body.status).toBe('committed');
    const open = await ask({ operation: 'upgrade_plan', params: { org: 'kept-co', plan: 'pro' } });
    const left = async () =>
      (
        await twokey.services.database.db
          .select()
          .from(requestIdentities)
          .where(inArray(requestIdentities.proposalId, [closed.body.id, open.body.id]))
      )
        .map((row) => row.proposalId)
        .sort();
    clock.advance(DAY - 60_000);
    await pruneExpired(twokey.services.database.db, clock());
    expect(await left()).toEqual([closed.body.id, open.body.id].sort());
    clock.advance(10 * 60_000);
    await pruneExpired(twokey.services.database.db, clock());
    expect(await left()).toEqual([open.body.id]);
  });
});
