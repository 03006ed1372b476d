import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/core/model.js';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { configYaml, payoutOperation, refundOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const HOUR = 3_600_000;

const grantsConfig = configYaml([
  refundOperation({
    customer: true,
    expiresIn: '1h',
    approvers: ['web:alice', 'web:bob', 'web:carol'],
    quorum: 1,
    grants: { maxDuration: '8h', durations: ['15m', '1h', '8h'] },
    commit: 'on_approve',
  }),
  payoutOperation({ approvers: ['web:alice', 'web:bob', 'web:carol'], quorum: 2, grants: { maxDuration: '8h' }, commit: 'on_approve' }),
  `  - name: no_grants
    description: Grants not allowed
    params: { type: object, properties: { n: { type: integer } } }
    summary: "{{agent}} does a thing."
    approval: { approvers: [web:alice] }
    executor: { type: echo }
`,
]);

describe.each(drivers)('grants (%s)', (driver) => {
  let twokey: TestTwokey;
  let agent: AgentRecord;
  let other: AgentRecord;
  const clock = manualClock();

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, clock, configYaml: grantsConfig });
    const { apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] });
    agent = await twokey.services.agents.authenticate(apiKey);
    const second = await twokey.createAgent('hermes');
    other = await twokey.services.agents.authenticate(second.apiKey);
  });
  afterAll(() => twokey.close());

  const propose = async (operation: string, params: Record<string, unknown>, by: AgentRecord = agent) =>
    (await twokey.services.proposals.propose(by, { operation, params })).proposal;
  const grantOn = (id: string, identity: string, request: { durationMs: number; maxUses?: number | null; bounded?: boolean }) =>
    twokey.services.grants.approveAndGrant(id, { identity, via: 'test' }, request);
  const auditTypes = async (id: string) => (await twokey.services.store.listAudit({ proposalId: id })).map((e) => e.type);

  it('"approve for 1 h" approves this one and the next ones of this agent, as grant:<id>, until it expires', async () => {
    const first = await propose('refund', { customer: 'c1', amount_cents: 500 });
    const { grant, proposal } = await grantOn(first.id, 'web:alice', { durationMs: HOUR });
    expect(proposal.status).toBe('committed');
    expect(grant).toMatchObject({ quorum: 1, uses: 0, maxUses: null });
    expect(grant.activatedAt).not.toBeNull();
    expect(await auditTypes(first.id)).toEqual(expect.arrayContaining(['grant.created', 'grant.activated']));

    clock.advance(HOUR - 1);
    const covered = await propose('refund', { customer: 'c2', amount_cents: 99_999 });
    expect(covered).toMatchObject({ status: 'committed', decidedBy: `grant:${grant.id}` });
    const view = await twokey.services.proposals.viewForAgent(agent, covered.id);
    expect(view.outcome).toMatchObject({ outcome: 'committed', userConsent: true, decidedBy: [`grant:${grant.id}`] });
    expect(await auditTypes(covered.id)).toEqual(['proposal.created', 'grant.used', 'proposal.approved', 'proposal.committed']);

    // Another agent is not covered; neither is this agent once the hour is over.
    expect((await propose('refund', { customer: 'c2', amount_cents: 1 }, other)).status).toBe('pending');
    clock.advance(1);
    expect((await propose('refund', { customer: 'c3', amount_cents: 1 })).status).toBe('pending');
  });

  it('bounded by this proposal: numbers up to its value, the rest equal', async () => {
    const first = await propose('refund', { customer: 'acme', amount_cents: 2000 });
    await grantOn(first.id, 'web:bob', { durationMs: HOUR, bounded: true });
    expect((await propose('refund', { customer: 'acme', amount_cents: 2000 })).status).toBe('committed');
    expect((await propose('refund', { customer: 'acme', amount_cents: 2001 })).status).toBe('pending');
    expect((await propose('refund', { customer: 'other', amount_cents: 10 })).status).toBe('pending');
    clock.advance(HOUR);
  });

  it('refuses a grant longer than maxDuration, or on an operation that does not allow grants, changing nothing', async () => {
    const p = await propose('refund', { customer: 'x', amount_cents: 1 });
    await expect(grantOn(p.id, 'web:alice', { durationMs: 9 * HOUR })).rejects.toMatchObject({ code: 'invalid_request' });
    const q = await propose('no_grants', { n: 1 });
    await expect(grantOn(q.id, 'web:alice', { durationMs: HOUR })).rejects.toMatchObject({ code: 'invalid_request' });
    expect((await twokey.services.proposals.get(p.id)).status).toBe('pending');
    expect((await twokey.services.proposals.get(q.id)).status).toBe('pending');
    await expect(grantOn(p.id, 'web:owner', { durationMs: HOUR })).rejects.toMatchObject({ code: 'owner_cannot_approve' });
    await expect(grantOn(p.id, 'web:mallory', { durationMs: HOUR })).rejects.toMatchObject({ code: 'not_an_approver' });
    expect(await twokey.services.grants.list({ agentId: agent.id, activeAt: clock() })).toHaveLength(0);
  });

  it('uses: 5 against 20 concurrent proposals → exactly 5 approved', async () => {
    const first = await propose('refund', { customer: 'burst', amount_cents: 1 });
    const { grant } = await grantOn(first.id, 'web:carol', { durationMs: HOUR, maxUses: 5 });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => propose('refund', { customer: 'burst', amount_cents: i + 1 })));
    const approved = results.filter((p) => p.decidedBy === `grant:${grant.id}`);
    expect(approved).toHaveLength(5);
    expect(results.filter((p) => p.status === 'pending')).toHaveLength(15);
    const [stored] = (await twokey.services.grants.list({})).filter((entry) => entry.grant.id === grant.id);
    expect(stored?.grant.uses).toBe(5);
    const uses = (await twokey.services.store.listAudit({ limit: 10_000 })).filter((e) => e.type === 'grant.used' && e.data.grantId === grant.id);
    expect(uses).toHaveLength(5);
    clock.advance(HOUR);
  });

  it('a revocation racing a use: the use happened before it, or not at all', async () => {
    for (let round = 0; round < 5; round += 1) {
      const first = await propose('refund', { customer: `race${round}`, amount_cents: 1 });
      const { grant } = await grantOn(first.id, 'web:alice', { durationMs: HOUR });
      const [used, revoked] = await Promise.all([propose('refund', { customer: 'r', amount_cents: 1 }), twokey.services.grants.revoke(grant.id, 'web:alice')]);
      const audit = (await twokey.services.store.listAudit({ limit: 10_000 })).filter((e) => e.data.grantId === grant.id);
      // Both transactions lock the grant's row before writing their audit rows, so insert order is lock order.
      const useSeq = audit.find((e) => e.type === 'grant.used')?.id;
      const revokeSeq = audit.find((e) => e.type === 'grant.revoked')?.id;
      expect(revokeSeq).toBeDefined();
      if (used.decidedBy === `grant:${grant.id}`) {
        expect(useSeq).toBeLessThan(revokeSeq as number);
        expect(revoked.uses).toBe(1);
      } else {
        expect(useSeq).toBeUndefined();
        expect(used.status).toBe('pending');
      }
      // After the revocation nothing is covered.
      expect((await propose('refund', { customer: 'after', amount_cents: 1 })).status).toBe('pending');
    }
    await expect(twokey.services.grants.revoke('grt_nope', 'web:alice')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('quorum 2: a grant from one approver covers nothing; the second approver activates it', async () => {
    const first = await propose('payout', { amount_cents: 100 });
    const one = await grantOn(first.id, 'web:alice', { durationMs: HOUR });
    expect(one.grant.activatedAt).toBeNull();
    expect((await propose('payout', { amount_cents: 1 })).status).toBe('pending');
    const two = await grantOn(first.id, 'web:bob', { durationMs: HOUR });
    expect(two.grant.id).toBe(one.grant.id);
    expect(two.grant.activatedAt).not.toBeNull();
    expect(two.proposal.status).toBe('committed');
    const covered = await propose('payout', { amount_cents: 1 });
    expect(covered).toMatchObject({ status: 'committed', decidedBy: `grant:${one.grant.id}` });
    expect(await auditTypes(first.id)).toEqual(expect.arrayContaining(['grant.created', 'grant.approved', 'grant.activated']));
  });
});
