import { describe, expect, it } from 'vitest';
import {
  DecisionRefused,
  countedApprovers,
  explainDecisionError,
  previewDecision,
  type DecisionAction,
  type DecisionFacts,
} from '../../src/core/decision-preview.js';
import { TwokeyError } from '../../src/core/errors.js';
import type { ApprovalRecord, ProposalRecord, ProposalStatus } from '../../src/core/model.js';
import { isFailedExecution, outcomeOf } from '../../src/core/outcome.js';
import { createPeople } from '../../src/core/people.js';
import { proposalRecord } from '../support/records.js';

const created = new Date('2026-11-23T10:00:00.000Z');
const expiresAt = new Date('2026-11-23T10:05:00.000Z');

const proposal = (patch: Partial<ProposalRecord> = {}): ProposalRecord =>
  proposalRecord({ id: 'prp_preview', agentId: 'agt_argus', quorum: 2, createdAt: created, expiresAt, ...patch });

const approval = (approver: string, matchedRule = approver): ApprovalRecord => ({ proposalId: 'prp_preview', approver, matchedRule, via: 'test', at: created });

const operation = { name: 'delete_workspace', approval: { approvers: ['web:alice', 'web:bob', 'slack:U0ALICE', 'web:owner', 'slack:group:S0OPS'] } };
const agent = { name: 'argus', owners: ['web:owner'] };

function facts(action: DecisionAction, patch: Partial<DecisionFacts> = {}): DecisionFacts {
  return {
    action,
    proposalId: 'prp_preview',
    proposal: proposal(),
    operation,
    agent,
    approvals: [],
    decider: { identity: 'web:alice', via: 'web' },
    now: created,
    ...patch,
  };
}

const refusal = (f: DecisionFacts) => {
  const preview = previewDecision(f);
  return preview.allowed ? null : preview.code;
};

describe('previewDecision', () => {
  it('allows an approver to approve and reject a pending proposal, naming the list entry that allowed it', () => {
    expect(previewDecision(facts('approve'))).toEqual({ allowed: true, action: 'approve', matchedRule: 'web:alice' });
    expect(previewDecision(facts('reject'))).toEqual({ allowed: true, action: 'reject', matchedRule: 'web:alice' });
    const viaGroup = previewDecision(facts('approve', { decider: { identity: 'slack:U0OPS', memberOf: ['slack:group:S0OPS'], via: 'slack' } }));
    expect(viaGroup).toEqual({ allowed: true, action: 'approve', matchedRule: 'slack:group:S0OPS' });
  });

  it('owner: refused for every action, even when on the approvers list, with the agent named', () => {
    for (const action of ['approve', 'reject', 'retry'] as const) {
      const preview = previewDecision(facts(action, { decider: { identity: 'web:owner', via: 'web' } }));
      expect(preview).toMatchObject({ allowed: false, code: 'owner_cannot_approve' });
      if (!preview.allowed) expect(preview.message).toContain('You own the agent "argus"');
      if (!preview.allowed) expect(preview.message).toContain('cannot decide');
    }
    // The console shows names bare (its markup sets them apart); the words are otherwise the same.
    const bare = previewDecision(facts('approve', { decider: { identity: 'web:owner', via: 'web' }, showName: (name) => name }));
    expect(bare).toMatchObject({ allowed: false, message: expect.stringContaining('You own the agent argus that proposed this') });
  });

  it("owner: another identity of the owner's person is refused too, naming the owning identity", () => {
    const people = createPeople([{ name: 'olga', identities: ['web:owner', 'slack:U0OLGA'] }]);
    const preview = previewDecision(facts('approve', { people, decider: { identity: 'slack:U0OLGA', via: 'slack' } }));
    expect(preview).toMatchObject({ allowed: false, code: 'owner_cannot_approve' });
    if (!preview.allowed) expect(preview.message).toContain('through web:owner');
    // Without the person, the same identity is just someone who is not on the list.
    expect(refusal(facts('approve', { decider: { identity: 'slack:U0OLGA', via: 'slack' } }))).toBe('not_an_approver');
  });

  it('non-approver: refused with who and which operation, before any state is looked at', () => {
    const preview = previewDecision(facts('approve', { decider: { identity: 'web:mallory', via: 'web' }, proposal: proposal({ status: 'committed' }) }));
    expect(preview).toMatchObject({ allowed: false, code: 'not_an_approver' });
    if (!preview.allowed) {
      expect(preview.message).toContain('You (web:mallory) are not an approver of delete_workspace');
      expect(preview.message).toContain('not on the approvers list');
    }
    // A group the person is not in does not help.
    expect(refusal(facts('approve', { decider: { identity: 'web:mallory', memberOf: ['slack:group:S0OTHER'], via: 'web' } }))).toBe('not_an_approver');
  });

  it('already counted: the same identity, or another identity of the same person; checked before the status', () => {
    const counted = previewDecision(facts('approve', { approvals: [approval('web:alice')] }));
    expect(counted).toMatchObject({ allowed: false, code: 'already_counted', message: 'Your approval is already counted (1 of 2).' });
    const people = createPeople([{ name: 'alice', identities: ['web:alice', 'slack:U0ALICE'] }]);
    const viaSlack = previewDecision(facts('approve', { people, approvals: [approval('slack:U0ALICE')] }));
    expect(viaSlack).toMatchObject({ allowed: false, code: 'already_counted', message: 'Your approval is already counted (1 of 2), given as slack:U0ALICE.' });
    // A late double click after the quorum is "already counted", not "not pending".
    expect(refusal(facts('approve', { approvals: [approval('web:alice')], proposal: proposal({ status: 'committed' }) }))).toBe('already_counted');
    // Someone else's approval does not count as mine; rejecting is not approving.
    expect(refusal(facts('approve', { approvals: [approval('web:bob')] }))).toBeNull();
    expect(refusal(facts('reject', { approvals: [approval('web:alice')] }))).toBeNull();
  });

  it('not pending: every other status refuses approve and reject', () => {
    const statuses: ProposalStatus[] = ['approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'];
    for (const status of statuses) {
      for (const action of ['approve', 'reject'] as const) {
        expect(refusal(facts(action, { proposal: proposal({ status }) }))).toBe('not_pending');
      }
    }
    const rejected = previewDecision(facts('reject', { proposal: proposal({ status: 'rejected' }) }));
    expect(rejected).toMatchObject({ message: 'This proposal has already been decided: it is rejected.' });
  });

  it('expired: allowed 1 ms before expiresAt, refused at expiresAt exactly (approve and reject)', () => {
    for (const action of ['approve', 'reject'] as const) {
      expect(refusal(facts(action, { now: new Date(expiresAt.getTime() - 1) }))).toBeNull();
      expect(refusal(facts(action, { now: expiresAt }))).toBe('expired');
      expect(refusal(facts(action, { now: new Date(expiresAt.getTime() + 1) }))).toBe('expired');
    }
  });

  it('retry: allowed only after a failed execution, and only for approvers who do not own the agent', () => {
    const failed = proposal({ status: 'approved', error: 'billing API answered 503' });
    expect(isFailedExecution(failed)).toBe(true);
    expect(outcomeOf(failed, []).outcome).toBe('failed');
    // Expiry does not bind a retry: the approval was given in time.
    expect(previewDecision(facts('retry', { proposal: failed, now: new Date(expiresAt.getTime() + 60_000) }))).toMatchObject({ allowed: true });
    expect(refusal(facts('retry', { proposal: failed, decider: { identity: 'web:mallory', via: 'web' } }))).toBe('not_an_approver');
    expect(refusal(facts('retry', { proposal: failed, decider: { identity: 'web:owner', via: 'web' } }))).toBe('owner_cannot_approve');
    for (const status of ['pending', 'approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'] as const) {
      expect(refusal(facts('retry', { proposal: proposal({ status }) }))).toBe('nothing_to_retry');
    }
    // A retry in flight keeps its error until it ends, but is no longer "failed".
    expect(refusal(facts('retry', { proposal: proposal({ status: 'executing', error: 'earlier failure' }) }))).toBe('nothing_to_retry');
  });

  it('a missing proposal or operation is refused first', () => {
    expect(previewDecision(facts('approve', { proposal: null }))).toMatchObject({
      allowed: false,
      code: 'not_found',
      message: 'twokey has no proposal prp_preview.',
    });
    expect(refusal(facts('approve', { operation: undefined }))).toBe('operation_removed');
  });
});

describe('countedApprovers', () => {
  it('counts people once, drops owners (any identity of their person) and entries no longer on the list', () => {
    const people = createPeople([
      { name: 'alice', identities: ['web:alice', 'slack:U0ALICE'] },
      { name: 'olga', identities: ['web:owner', 'web:olga'] },
    ]);
    const approvals = [
      approval('web:alice'),
      approval('slack:U0ALICE'),
      approval('web:olga', 'slack:group:S0OPS'),
      approval('web:bob'),
      approval('web:gone', 'web:removed'),
    ];
    expect(countedApprovers(approvals, operation, agent.owners, people)).toEqual(['web:alice', 'web:bob']);
    // Without people every identity is its own person.
    expect(countedApprovers(approvals, operation, agent.owners)).toEqual(['web:alice', 'slack:U0ALICE', 'web:olga', 'web:bob']);
  });
});

describe('explainDecisionError', () => {
  it("says the core's words for its refusals and the code's words for a bare error, ending with what changed", () => {
    const preview = previewDecision(facts('approve', { decider: { identity: 'web:mallory', via: 'web' } }));
    if (preview.allowed || preview.code === 'already_counted') throw new Error('expected a refusal');
    const refused = new DecisionRefused(preview.code, preview.message);
    expect(refused).toBeInstanceOf(TwokeyError);
    expect(refused.status).toBe(403);
    expect(explainDecisionError(refused, 'approve')).toBe(`${preview.message} Nothing was changed.`);
    expect(explainDecisionError(new TwokeyError('not_pending', 'already decided'), 'reject')).toBe(
      'This proposal has already been decided. Nothing was changed.',
    );
    expect(explainDecisionError(new TwokeyError('execution_failed', 'execution failed: timeout'), 'retry')).toContain('The operation failed again: timeout');
    expect(explainDecisionError(new Error('boom'), 'approve')).not.toContain('boom');
  });
});
