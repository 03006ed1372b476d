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

  it('runs the checks in order: consumed before expired before principal', async () => {
    const { id, token } = await propose();
    await approve(id);
    await commit(id, token);
    clock.advance(10 * 60_000);
    await expect(commit(id, token, undefined, other)).rejects.toMatchObject({ code: 'consumed' });
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

  it('a throwing side effect leaves the token unconsumed; the retry commits; the next is consumed', async () => {
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

    await expect(commit(id, token)).rejects.toMatchObject({ code: 'consumed' });
    expect(executions).toBe(before + 1);
  });

  it('records every step in the audit log, in order', async () => {
    const { id, token } = await propose();
    await approve(id);
    await commit(id, token);
    const events = await twokey.services.audit.list({ proposalId: id });
    expect(events.map((event) => event.type)).toEqual(['proposal.created', 'approval.recorded', 'proposal.approved', 'proposal.committed']);
  });
});
