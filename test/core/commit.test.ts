import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe.each(drivers)('commit checks (%s)', (driver) => {
  const clock = manualClock();
  let failNextExecution = false;
  let executions = 0;
  const flakyEcho: Executor = {
    kind: 'local',
    async run(request) {
      executions += 1;
      if (failNextExecution) {
        failNextExecution = false;
        throw new Error('downstream exploded');
      }
      return { done: request.params };
    },
  };
  let twokey: TestTwokey;
  let argus: { apiKey: string; id: string };
  let other: { apiKey: string; id: string };

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, clock, executorFor: () => flakyEcho });
    argus = await twokey.createAgent('argus');
    other = await twokey.createAgent('other');
  });
  afterAll(() => twokey.close());

  const params = { org: 'acme', plan: 'scale' };

  async function propose(agent = argus, proposalParams: Record<string, unknown> = params) {
    const { proposal, confirmToken } = await twokey.services.proposals.propose(await twokey.services.agents.authenticate(agent.apiKey), {
      operation: 'upgrade_plan',
      params: proposalParams,
    });
    return { id: proposal.id, token: confirmToken };
  }
  const approve = (id: string, identity = 'web:alice') => twokey.services.proposals.approve(id, { identity, via: 'test' });
  const commit = async (id: string, token: string, claim: { operation: string; params: unknown } = { operation: 'upgrade_plan', params }, agent = argus) =>
    twokey.services.proposals.commit(await twokey.services.agents.authenticate(agent.apiKey), id, token, claim);
  const commitAgain = async (id: string, token: string, claim: { operation: string; params: unknown } = { operation: 'upgrade_plan', params }) =>
    twokey.services.proposals.commitWithApprovals(await twokey.services.agents.authenticate(argus.apiKey), id, token, claim);

  it('refuses a token that does not exist, with invalid_token', async () => {
    const { id } = await propose();
    await approve(id);
    await expect(commit(id, 'tk_conf_' + 'A'.repeat(43))).rejects.toMatchObject({ code: 'invalid_token' });
  });

  it("refuses another proposal's token, with invalid_token", async () => {
    const first = await propose();
    const second = await propose();
    await approve(first.id);
    await expect(commit(first.id, second.token)).rejects.toMatchObject({ code: 'invalid_token' });
  });

  it('refuses a commit before approval, with not_approved', async () => {
    const { id, token } = await propose();
    await expect(commit(id, token)).rejects.toMatchObject({ code: 'not_approved' });
  });

  it('refuses a rejected proposal, with rejected', async () => {
    const { id, token } = await propose();
    await twokey.services.proposals.reject(id, { identity: 'web:bob', via: 'test' }, 'not this quarter');
    await expect(commit(id, token)).rejects.toMatchObject({ code: 'rejected', message: expect.stringContaining('not this quarter') });
  });

  it('refuses another agent, with principal_mismatch', async () => {
    const { id, token } = await propose();
    await approve(id);
    await expect(commit(id, token, undefined, other)).rejects.toMatchObject({ code: 'principal_mismatch' });
  });

  it('refuses another operation, with operation_mismatch', async () => {
    const { id, token } = await propose();
    await approve(id);
    await expect(commit(id, token, { operation: 'delete_workspace', params })).rejects.toMatchObject({ code: 'operation_mismatch' });
  });

  it('refuses params that differ in one leaf, with params_mismatch', async () => {
    const { id, token } = await propose();
    await approve(id);
    await expect(commit(id, token, { operation: 'upgrade_plan', params: { org: 'acme', plan: 'enterprise' } })).rejects.toMatchObject({
      code: 'params_mismatch',
    });
  });

  it('accepts the same params in another key order', async () => {
    const { id, token } = await propose();
    await approve(id);
    const committed = await commit(id, token, { operation: 'upgrade_plan', params: { plan: 'scale', org: 'acme' } });
    expect(committed.status).toBe('committed');
  });

  it('runs the checks in order: principal before consumed before expired before the binding', async () => {
    const spent = await propose();
    const late = await propose();
    await approve(spent.id);
    await approve(late.id);
    await commit(spent.id, spent.token);
    clock.advance(10 * 60_000);
    const otherParams = { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } };
    // Another agent holding the token learns nothing of its state.
    await expect(commit(spent.id, spent.token, otherParams, other)).rejects.toMatchObject({ code: 'principal_mismatch' });
    await expect(commit(spent.id, spent.token, otherParams)).rejects.toMatchObject({ code: 'consumed' });
    await expect(commit(late.id, late.token, otherParams, other)).rejects.toMatchObject({ code: 'principal_mismatch' });
    await expect(commit(late.id, late.token, otherParams)).rejects.toMatchObject({ code: 'expired' });
    clock.advance(-10 * 60_000);
  });

  it('pins the expiry boundary: 1 ms before expiresAt commits, at expiresAt refuses', async () => {
    const early = await propose();
    const late = await propose();
    await approve(early.id);
    await approve(late.id);
    const expiresAt = (await twokey.services.proposals.get(early.id)).expiresAt.getTime();
    const start = clock().getTime();
    clock.set(new Date(expiresAt - 1));
    await expect(commit(early.id, early.token)).resolves.toMatchObject({ status: 'committed' });
    clock.set(new Date(expiresAt));
    await expect(commit(late.id, late.token)).rejects.toMatchObject({ code: 'expired' });
    clock.set(new Date(start));
  });

  it('a throwing side effect leaves the token unconsumed; the retry commits; the next gets its result', async () => {
    const { id, token } = await propose();
    await approve(id);
    failNextExecution = true;
    await expect(commit(id, token)).rejects.toMatchObject({ code: 'execution_failed' });
    const failed = await twokey.services.proposals.get(id);
    expect(failed).toMatchObject({ status: 'approved', consumedAt: null, error: 'downstream exploded' });

    const before = executions;
    const committed = await commit(id, token);
    expect(committed).toMatchObject({ status: 'committed', result: { done: params }, error: null });
    expect(executions).toBe(before + 1);

    await expect(commitAgain(id, token)).resolves.toMatchObject({ replayed: true, proposal: { status: 'committed', result: { done: params } } });
    expect(executions).toBe(before + 1);
  });

  describe('a commit that already happened', () => {
    it('answers the same agent, token, operation and params with the stored result, running and writing nothing', async () => {
      const { id, token } = await propose();
      await approve(id);
      const first = await commitAgain(id, token);
      expect(first).toMatchObject({ replayed: false, proposal: { status: 'committed', result: { done: params } } });
      const before = { executions, audit: (await twokey.services.audit.list({ proposalId: id })).length };

      // Past the token's expiry too: the commit happened before it.
      clock.advance(10 * 60_000);
      const again = await commitAgain(id, token, { operation: 'upgrade_plan', params: { plan: 'scale', org: 'acme' } });
      clock.advance(-10 * 60_000);
      expect(again).toEqual({ ...first, replayed: true });
      expect(executions).toBe(before.executions);
      expect(await twokey.services.audit.list({ proposalId: id })).toHaveLength(before.audit);
    });

    it('is "consumed" for anything else of its agent: other params, another operation', async () => {
      const { id, token } = await propose();
      await approve(id);
      await commit(id, token);
      await expect(commit(id, token, { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } })).rejects.toMatchObject({ code: 'consumed' });
      await expect(commit(id, token, { operation: 'delete_workspace', params })).rejects.toMatchObject({ code: 'consumed' });
      // The agent the token was not issued to never sees the result, nor that it was used.
      await expect(commit(id, token, undefined, other)).rejects.toMatchObject({ code: 'principal_mismatch' });
    });

    it("still needs this proposal's token", async () => {
      const first = await propose();
      const second = await propose();
      await approve(first.id);
      await approve(second.id);
      await commit(first.id, first.token);
      await commit(second.id, second.token);
      await expect(commit(first.id, second.token)).rejects.toMatchObject({ code: 'invalid_token' });
      await expect(commit(first.id, 'tk_conf_' + 'A'.repeat(43))).rejects.toMatchObject({ code: 'invalid_token' });
    });

    it('of two simultaneous commits, one runs and the other gets its result', async () => {
      const { id, token } = await propose();
      await approve(id);
      const before = executions;
      const both = await Promise.all([commitAgain(id, token), commitAgain(id, token)]);
      expect(both.map((answer) => answer.replayed).sort()).toEqual([false, true]);
      expect(both[0]?.proposal).toEqual(both[1]?.proposal);
      expect(executions).toBe(before + 1);
    });
  });

  it('records every step in the audit log, in order', async () => {
    const { id, token } = await propose();
    await approve(id);
    await commit(id, token);
    const events = await twokey.services.audit.list({ proposalId: id });
    expect(events.map((event) => event.type)).toEqual(['proposal.created', 'approval.recorded', 'proposal.approved', 'proposal.committed']);
  });
});
