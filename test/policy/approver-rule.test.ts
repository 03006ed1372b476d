import { describe, expect, it } from 'vitest';
import { previewDecision } from '../../src/core/decision-preview.js';
import { createPeople } from '../../src/core/people.js';
import { approverRuleAllows, compileApproverRule } from '../../src/policy/approver-rule.js';
import { identities } from '../../src/platforms/index.js';

const paramsSchema = { type: 'object', additionalProperties: false, required: ['amount_cents'], properties: { amount_cents: { type: 'integer' } } };
const compile = (when: string, reason?: string) =>
  compileApproverRule({ when, reason }, { operation: 'refund', paramsSchema, groupIdentity: identities.platformGroupPattern });
const approver = (identity: string, person: string, groups: string[] = []) => ({ identity, person, groups });

describe('approver rules', () => {
  it('"over $1,000 needs finance-leads": only a real true allows', () => {
    const rule = compile('params.amount_cents <= 100000 || "finance-leads" in approver.groups', 'refunds over $1,000 need finance-leads');
    const base = { agent: 'refund-bot', owners: [], operation: 'refund' };
    expect(approverRuleAllows(rule, { ...base, approver: approver('web:a', 'a'), params: { amount_cents: 100_000 } })).toEqual({ allowed: true });
    expect(approverRuleAllows(rule, { ...base, approver: approver('web:a', 'a'), params: { amount_cents: 100_001 } })).toEqual({
      allowed: false,
      reason: 'refunds over $1,000 need finance-leads',
    });
    expect(approverRuleAllows(rule, { ...base, approver: approver('web:a', 'a', ['finance-leads']), params: { amount_cents: 100_001 } })).toEqual({
      allowed: true,
    });
    // The trap: a type mismatch is returned, not thrown. It refuses, and says why.
    const broken = approverRuleAllows(rule, { ...base, approver: approver('web:a', 'a'), params: { amount_cents: 'lots' } });
    expect(broken).toMatchObject({ allowed: false, reason: 'refunds over $1,000 need finance-leads', error: expect.stringContaining('no matching overload') });
  });

  it('"never the person who owns the agent", across the person’s identities', () => {
    const rule = compile('!(approver.person in owners)');
    const input = { agent: 'refund-bot', operation: 'refund', params: { amount_cents: 1 } };
    expect(approverRuleAllows(rule, { ...input, approver: approver('slack:U0ALICE', 'alice'), owners: ['alice'] })).toMatchObject({ allowed: false });
    expect(approverRuleAllows(rule, { ...input, approver: approver('slack:U0BOB', 'bob'), owners: ['alice'] })).toEqual({ allowed: true });
    expect(rule.reason).toBe('the approver rule of refund (!(approver.person in owners)) does not allow you');
  });

  it('previewDecision refuses an approval the rule refuses, lets a rejection through, and maps people for the rule', () => {
    const rule = compile('approver.person != "mallory"', 'mallory approves no refunds');
    const people = createPeople([{ name: 'mallory', identities: ['web:mallory', 'slack:U0MAL'] }]);
    const now = new Date('2026-11-27T10:00:00Z');
    const proposal = {
      id: 'prp_1',
      operation: 'refund',
      agentId: 'agt_1',
      params: { amount_cents: 5 },
      status: 'pending',
      quorum: 1,
      expiresAt: new Date(now.getTime() + 60_000),
    } as never;
    const facts = (action: 'approve' | 'reject', identity: string) => ({
      action,
      proposalId: 'prp_1',
      proposal,
      operation: { name: 'refund', approval: { approvers: ['slack:U0MAL', 'web:ok'], approverRule: rule } },
      agent: { name: 'refund-bot', owners: ['web:owner'] },
      approvals: [],
      decider: { identity, via: 'slack' },
      now,
      people,
    });
    expect(previewDecision(facts('approve', 'slack:U0MAL'))).toMatchObject({
      allowed: false,
      code: 'approver_rule',
      message: 'You (slack:U0MAL) may not approve this proposal: mallory approves no refunds.',
    });
    expect(previewDecision(facts('reject', 'slack:U0MAL'))).toMatchObject({ allowed: true });
    expect(previewDecision(facts('approve', 'web:ok'))).toMatchObject({ allowed: true });
  });

  it('names the group identities it mentions, so a channel can look them up', () => {
    expect(compile('"slack:group:S0FIN" in approver.groups || "discord:role:223456789012345678" in approver.groups').mentionedGroups).toEqual([
      'slack:group:S0FIN',
      'discord:role:223456789012345678',
    ]);
  });
});
