import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe.each(drivers)('approvals and quorum (%s)', (driver) => {
  let executions = 0;
  const countingEcho: Executor = {
    kind: 'local',
    async run(request) {
      executions += 1;
      return { deleted: request.params.workspace };
    },
  };
  let twokey: TestTwokey;
  let argusKey: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, executorFor: () => countingEcho });
    ({ apiKey: argusKey } = await twokey.createAgent('argus', { owners: ['web:carol', 'web:owner'] }));
  });
  afterAll(() => twokey.close());

  async function proposeDeletion(workspace = 'w') {
    const agent = await twokey.services.agents.authenticate(argusKey);
    const { proposal } = await twokey.services.proposals.propose(agent, { operation: 'delete_workspace', params: { workspace } });
    return proposal.id;
  }
  const decide = (id: string, identity: string) => twokey.services.proposals.approve(id, { identity, via: 'test' });
  const approvalCount = async (id: string) => (await twokey.services.store.listApprovals(id)).length;

  it('quorum 2: one approver twice stays at 1 of 2; a second approver commits (on_approve)', async () => {
    const id = await proposeDeletion();
    expect((await decide(id, 'web:alice')).outcome).toBe('counted');
    expect((await decide(id, 'web:alice')).outcome).toBe('already_counted');
    expect(await approvalCount(id)).toBe(1);
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');

    const before = executions;
    const second = await decide(id, 'web:bob');
    expect(second.outcome).toBe('quorum_reached');
    expect(second.proposal).toMatchObject({ status: 'committed', result: { deleted: 'w' } });
    expect(executions).toBe(before + 1);

    // A late double click changes nothing and runs nothing.
    expect((await decide(id, 'web:bob')).outcome).toBe('already_counted');
    expect(executions).toBe(before + 1);
  });

  it("refuses an owner's approval even when the owner is on the approvers list", async () => {
    const id = await proposeDeletion();
    await expect(decide(id, 'web:carol')).rejects.toMatchObject({ code: 'owner_cannot_approve' });
    expect(await approvalCount(id)).toBe(0);
  });

  it('refuses someone who is not an approver', async () => {
    const id = await proposeDeletion();
    await expect(decide(id, 'web:mallory')).rejects.toMatchObject({ code: 'not_an_approver' });
    await expect(twokey.services.proposals.reject(id, { identity: 'web:mallory', via: 'test' }, 'no')).rejects.toMatchObject({
      code: 'not_an_approver',
    });
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');
  });

  it('accepts an approver through a group or role the transport resolved', async () => {
    const id = await proposeDeletion();
    const outcome = await twokey.services.proposals.approve(id, { identity: 'web:zed', memberOf: ['web:alice'], via: 'test' });
    expect(outcome.outcome).toBe('counted');
    expect((await twokey.services.store.listApprovals(id))[0]).toMatchObject({ approver: 'web:zed', matchedRule: 'web:alice' });
  });

  it('a rejected proposal cannot be approved afterwards', async () => {
    const id = await proposeDeletion();
    await twokey.services.proposals.reject(id, { identity: 'web:alice', via: 'test' }, '  wrong workspace  ');
    expect(await twokey.services.proposals.get(id)).toMatchObject({ status: 'rejected', decisionReason: 'wrong workspace', decidedBy: 'web:alice' });
    await expect(decide(id, 'web:bob')).rejects.toMatchObject({ code: 'not_pending' });
  });

  it('a reason holding NUL characters (which PostgreSQL text cannot store) still rejects, without them', async () => {
    const id = await proposeDeletion();
    await twokey.services.proposals.reject(id, { identity: 'web:alice', via: 'test' }, 'wrong\u0000 workspace\u0000');
    expect(await twokey.services.proposals.get(id)).toMatchObject({ status: 'rejected', decisionReason: 'wrong workspace' });
  });

  it('50 concurrent approvals of one proposal by one approver count once', async () => {
    const id = await proposeDeletion('race');
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => decide(id, 'web:alice')));
    expect(outcomes.filter((o) => o.outcome === 'counted')).toHaveLength(1);
    expect(outcomes.filter((o) => o.outcome === 'already_counted')).toHaveLength(49);
    expect(await approvalCount(id)).toBe(1);
  });

  it('50 concurrent final approvals by two approvers execute exactly once', async () => {
    const id = await proposeDeletion('race-2');
    const before = executions;
    await Promise.all(Array.from({ length: 50 }, (_, i) => decide(id, i % 2 === 0 ? 'web:alice' : 'web:bob')));
    expect(executions).toBe(before + 1);
    expect((await twokey.services.proposals.get(id)).status).toBe('committed');
    const committed = (await twokey.services.audit.list({ proposalId: id })).filter((e) => e.type === 'proposal.committed');
    expect(committed).toHaveLength(1);
  });

  it('expires pending proposals past their expiry, once, however many sweep', async () => {
    const id = await proposeDeletion('old');
    const expiresAt = (await twokey.services.proposals.get(id)).expiresAt;
    const sweeper = (await import('../../src/core/proposals.js')).createProposalService({
      store: twokey.services.store,
      clock: () => new Date(expiresAt.getTime() + 1),
      executorFor: () => countingEcho,
      operation: twokey.services.operation,
    });
    const counts = await Promise.all([sweeper.expireDue(), sweeper.expireDue(), sweeper.expireDue()]);
    expect(counts.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
    expect((await twokey.services.proposals.get(id)).status).toBe('expired');
    const expiredEvents = (await twokey.services.audit.list({ proposalId: id })).filter((e) => e.type === 'proposal.expired');
    expect(expiredEvents).toHaveLength(1);
    await expect(decide(id, 'web:alice')).rejects.toMatchObject({ code: 'not_pending' });
  });
});

describe.each(drivers)('concurrent commits (%s)', (driver) => {
  it('50 concurrent commits of one token: exactly one runs, the 49 repeats answer its stored result', async () => {
    let executions = 0;
    const twokey = await startTestTwokey({
      driver,
      executorFor: () => ({
        kind: 'local',
        async run() {
          executions += 1;
          return { ok: true };
        },
      }),
    });
    try {
      const { apiKey } = await twokey.createAgent('racer');
      const params = { org: 'acme', plan: 'pro' };
      const proposed = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params } });
      await twokey.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
      const responses = await Promise.all(
        Array.from({ length: 50 }, () =>
          twokey.request('POST', `/v1/proposals/${proposed.body.id}/commit`, {
            apiKey,
            headers: { 'x-confirmation-token': proposed.body.confirmToken },
            body: { operation: 'upgrade_plan', params },
          }),
        ),
      );
      // The same agent, token and request: one commit runs; every other is a replay of its stored result.
      expect(responses.filter((r) => r.status === 200 && r.body.replayed === undefined)).toHaveLength(1);
      expect(responses.filter((r) => r.status === 200 && r.body.replayed === true)).toHaveLength(49);
      expect(executions).toBe(1);
    } finally {
      await twokey.close();
    }
  });
});
