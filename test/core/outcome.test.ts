import { outcomeText } from '@twokey/client';
import { describe, expect, it } from 'vitest';
import type { ApprovalRecord, ProposalRecord } from '../../src/core/model.js';
import { outcomeOf } from '../../src/core/outcome.js';
import { proposalRecord } from '../support/records.js';

function proposal(overrides: Partial<ProposalRecord>): ProposalRecord {
  const at = new Date('2026-01-01T00:00:00Z');
  return proposalRecord({ operation: 'refund', params: {}, createdAt: at, expiresAt: at, ...overrides });
}
const approval = (approver: string): ApprovalRecord => ({ proposalId: 'prp_1', approver, matchedRule: approver, via: 'web', at: new Date() });

describe('outcomeOf', () => {
  it('never reads consent into silence: an expired proposal is expired, without consent, not retryable', () => {
    const outcome = outcomeOf(proposal({ status: 'expired' }), []);
    expect(outcome).toMatchObject({ outcome: 'expired', userConsent: false, retryable: false, decidedBy: [], proposalId: 'prp_1' });
    expect(outcomeText(outcome)).toMatch(/did not happen; do not retry it or work around it/);
  });

  it('a rejection is a denial by the person who rejected, with the reason', () => {
    const outcome = outcomeOf(proposal({ status: 'rejected', decidedBy: 'slack:UBOB', decisionReason: 'too big' }), []);
    expect(outcome).toEqual({ outcome: 'denied', userConsent: false, retryable: false, reason: 'too big', decidedBy: ['slack:UBOB'], proposalId: 'prp_1' });
    expect(outcomeText(outcome)).toBe('Denied by slack:UBOB: too big. The action did not happen; do not retry it or work around it.');
  });

  it('an approved proposal whose execution failed is failed, with consent, and retryable', () => {
    const outcome = outcomeOf(proposal({ status: 'approved', error: 'downstream answered 502' }), [approval('web:alice')]);
    expect(outcome).toMatchObject({ outcome: 'failed', userConsent: true, retryable: true, reason: 'downstream answered 502', decidedBy: ['web:alice'] });
  });

  it('committed carries every approver and the result in its words', () => {
    const outcome = outcomeOf(proposal({ status: 'committed', result: { ok: 1 } }), [approval('web:alice'), approval('slack:UBOB')]);
    expect(outcome).toMatchObject({ outcome: 'committed', userConsent: true, retryable: false, decidedBy: ['web:alice', 'slack:UBOB'] });
    expect(outcomeText(outcome, { result: { ok: 1 } })).toBe('Approved by web:alice, slack:UBOB and done: {"ok":1}');
  });

  it('pending asks to call again and names who must approve', () => {
    const outcome = outcomeOf(proposal({ status: 'pending' }), []);
    expect(outcome).toMatchObject({ outcome: 'pending', userConsent: false, retryable: true });
    expect(outcomeText(outcome, { awaiting: ['slack:UALICE'] })).toMatch(/^Waiting for approval by slack:UALICE; call this tool again with the same arguments/);
  });

  it('executing and approved without an error are approved with consent', () => {
    expect(outcomeOf(proposal({ status: 'executing' }), [approval('web:a')]).outcome).toBe('approved');
    expect(outcomeOf(proposal({ status: 'approved' }), [approval('web:a')])).toMatchObject({ outcome: 'approved', userConsent: true });
  });
});
