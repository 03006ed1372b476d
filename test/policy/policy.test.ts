import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/config-file.js';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { configYaml, refundOperation, type PolicyRule } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const REFUND_RULES: readonly PolicyRule[] = [
  { when: "params.customer == 'blocked'", decide: 'deny', reason: 'this customer is blocked from refunds' },
  { when: 'params.amount_cents <= 2000', decide: 'approve', reason: 'small refunds are automatic' },
  { when: 'params.note.size() > 3 && int(params.note) > 1000', decide: 'approve' },
  { when: 'params.amount_cents > 100000', decide: 'require', quorum: 2 },
];

export const refundConfig = (policy: readonly PolicyRule[] = REFUND_RULES) =>
  configYaml([
    refundOperation({
      customer: true,
      note: true,
      confirmationType: 'payment',
      expiresIn: '1h',
      policy,
      approvers: ['web:alice', 'web:bob', 'web:carol'],
      quorum: 1,
      commit: 'on_approve',
    }),
  ]);

function configProblems(yaml: string): string[] {
  try {
    parseConfig(yaml, {}, 'test.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return [...error.issues];
    throw error;
  }
  return [];
}

/** The refund operation with these rules in place of its own. */
const withRule = (...rules: PolicyRule[]) => refundConfig(rules);

describe('policy rules at start', () => {
  it('a syntax error names the rule', () => {
    expect(configProblems(withRule({ when: 'params.amount_cents <=', decide: 'approve' }))).toEqual([
      expect.stringMatching(/^operations\[0\]\.policy\[0\]\.when: not a CEL expression/),
    ]);
  });

  it('type errors are found at start, each naming its rule', () => {
    const problems = configProblems(
      withRule(
        { when: 'agent > 5', decide: 'approve' },
        { when: "params.amount_cents < '10'", decide: 'approve' },
        { when: 'params.amount_cents + 1', decide: 'approve' },
        { when: 'params.amount_cents <= 10', decide: 'approve' },
      ),
    );
    expect(problems).toHaveLength(3);
    expect(configProblems(withRule({ when: 'params.customer', decide: 'approve' }))).toEqual([
      'operations[0].policy[0].when: the condition returned a string, not a boolean',
    ]);
    expect(problems[0]).toMatch(/^operations\[0\]\.policy\[0\]\.when: /);
    expect(problems[1]).toMatch(/^operations\[0\]\.policy\[1\]\.when: /);
    expect(problems[2]).toMatch(/^operations\[0\]\.policy\[2\]\.when: /);
  });

  it('an undeclared param or an unknown name is refused at start', () => {
    expect(configProblems(withRule({ when: 'params.amount < 10', decide: 'approve' }))).toEqual([
      'operations[0].policy[0].when: params.amount is not a param of this operation',
    ]);
    expect(configProblems(withRule({ when: "user == 'x'", decide: 'approve' }))[0]).toMatch(/unknown name "user"/);
  });

  it('quorum belongs to require only', () => {
    expect(configProblems(withRule({ when: 'true', decide: 'approve', quorum: 2 }))).toEqual([
      'operations[0].policy[0]: quorum and approvers belong to decide: require',
    ]);
  });
});

describe.each(drivers)('policy rules at propose time (%s)', (driver) => {
  let twokey: TestTwokey;
  let key: string;
  const clock = manualClock();

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, clock, configYaml: refundConfig() });
    ({ apiKey: key } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
  });
  afterAll(() => twokey.close());

  const propose = (params: Record<string, unknown>) => twokey.request('POST', '/v1/proposals', { apiKey: key, body: { operation: 'refund', params } });
  const auditOf = async (id: string) =>
    (await twokey.services.store.listAudit({ proposalId: id })).map((e) => ({ type: e.type, actor: e.actor, data: e.data }));

  it('2000 is approved by the rule (<=) and runs, with no human; the outcome names the rule', async () => {
    const answer = await propose({ customer: 'c1', amount_cents: 2000 });
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      status: 'committed',
      outcome: { outcome: 'committed', userConsent: true, retryable: false, reason: 'small refunds are automatic', decidedBy: ['policy:refund#1'] },
    });
    const audit = await auditOf(answer.body.id);
    expect(audit.map((e) => e.type)).toEqual(['proposal.created', 'proposal.approved', 'proposal.committed']);
    expect(audit[1]).toMatchObject({
      actor: 'policy:refund#1',
      data: { via: 'policy', rule: 'operations[0].policy[1]', reason: 'small refunds are automatic' },
    });
    const view = await twokey.request('GET', `/v1/proposals/${answer.body.id}`, { apiKey: key });
    expect(view.body).toMatchObject({
      status: 'committed',
      decision: { by: 'policy:refund#1', reason: 'small refunds are automatic' },
      outcome: { decidedBy: ['policy:refund#1'] },
    });
  });

  it('2001 is not approved by the rule: it waits for a human', async () => {
    const answer = await propose({ customer: 'c1', amount_cents: 2001, note: 'ab' });
    expect(answer.body).toMatchObject({ status: 'pending', quorum: 1, outcome: { outcome: 'pending' } });
  });

  it('a deny reaches the agent with its reason, denied, not retryable', async () => {
    const answer = await propose({ customer: 'blocked', amount_cents: 10 });
    expect(answer.body).toMatchObject({
      status: 'rejected',
      outcome: { outcome: 'denied', userConsent: false, retryable: false, reason: 'this customer is blocked from refunds', decidedBy: ['policy:refund#0'] },
    });
    const view = await twokey.request('GET', `/v1/proposals/${answer.body.id}`, { apiKey: key });
    expect(view.body.decision).toMatchObject({ by: 'policy:refund#0', reason: 'this customer is blocked from refunds' });
  });

  it('require overrides the quorum for this case', async () => {
    const answer = await propose({ customer: 'c1', amount_cents: 100001, note: 'ab' });
    expect(answer.body).toMatchObject({ status: 'pending', quorum: 2 });
    const audit = await auditOf(answer.body.id);
    expect(audit[1]).toMatchObject({ type: 'policy.required', actor: 'policy:refund#3', data: { quorum: 2 } });
    const first = await twokey.services.proposals.approve(answer.body.id, { identity: 'web:alice', via: 'test' });
    expect(first.outcome).toBe('counted');
    const second = await twokey.services.proposals.approve(answer.body.id, { identity: 'web:bob', via: 'test' });
    expect(second.proposal.status).toBe('committed');
  });

  it('a rule that errors at run time (a missing param) falls back to human approval, audited, never approves', async () => {
    // Rule #2 reads params.note, which this proposal does not have: a CelError, not an exception.
    const answer = await propose({ customer: 'c1', amount_cents: 5000 });
    expect(answer.body).toMatchObject({ status: 'pending', quorum: 1 });
    const audit = await auditOf(answer.body.id);
    expect(audit[1]).toMatchObject({ type: 'policy.error', actor: 'system', data: { rule: 'operations[0].policy[2]', fallback: 'require' } });
    expect(String(audit[1]?.data.error)).toMatch(/note/);
  });

  it('a rule that errors at run time on a conversion also falls back', async () => {
    const answer = await propose({ customer: 'c1', amount_cents: 5000, note: 'abcd' });
    expect(answer.body.status).toBe('pending');
    expect((await auditOf(answer.body.id))[1]).toMatchObject({ type: 'policy.error', data: { rule: 'operations[0].policy[2]' } });
  });
});

describe.runIf(drivers.includes('postgres'))('a policy decision seen from a second replica (postgres)', () => {
  it('replica B answers with the decision replica A recorded', async () => {
    const { openTestDatabase } = await import('../support/database.js');
    const database = await openTestDatabase('postgres');
    const a = await startTestTwokey({ driver: 'postgres', database, configYaml: refundConfig() });
    const b = await startTestTwokey({ driver: 'postgres', database, configYaml: refundConfig() });
    try {
      const { apiKey } = await a.createAgent('argus');
      const pending = await a.request('POST', '/v1/proposals', {
        apiKey,
        body: { operation: 'refund', params: { customer: 'c', amount_cents: 2001, note: 'ab' } },
      });
      expect(pending.body.status).toBe('pending');
      const denied = await a.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { customer: 'blocked', amount_cents: 1 } } });
      const seen = await b.request('GET', `/v1/proposals/${denied.body.id}`, { apiKey });
      expect(seen.body).toMatchObject({
        status: 'rejected',
        decision: { by: 'policy:refund#0' },
        outcome: { outcome: 'denied', reason: 'this customer is blocked from refunds' },
      });
      const approved = await a.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { customer: 'c', amount_cents: 5 } } });
      const onB = await b.request('GET', `/v1/proposals/${approved.body.id}`, { apiKey });
      expect(onB.body).toMatchObject({ status: 'committed', outcome: { decidedBy: ['policy:refund#1'] } });
    } finally {
      await a.close();
      await b.close();
      await database.close();
    }
  });
});
