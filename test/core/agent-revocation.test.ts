import { describe, expect, it } from 'vitest';
import { agentRevokeRight } from '../../src/core/agent-revocation.js';

const operations = [
  { name: 'refund', approval: { approvers: ['web:alice', 'web:bob'] } },
  { name: 'payout', approval: { approvers: ['web:alice', 'slack:group:S1'] } },
];

describe('who besides the operator may revoke an agent', () => {
  it('an approver of every operation the agent may propose, who does not own it', () => {
    expect(agentRevokeRight('web:alice', { owners: [], operations: null }, operations)).toEqual({ can: true });
    expect(agentRevokeRight('web:bob', { owners: [], operations: ['refund'] }, operations)).toEqual({ can: true });
  });

  it('not someone who approves only some of them', () => {
    expect(agentRevokeRight('web:bob', { owners: [], operations: null }, operations)).toEqual({
      can: false,
      why: 'Operators only: you do not approve every operation it may propose.',
    });
    expect(agentRevokeRight('web:mallory', { owners: [], operations: ['refund'] }, operations).can).toBe(false);
  });

  it('never an owner, even one who approves everything', () => {
    expect(agentRevokeRight('web:alice', { owners: ['web:alice'], operations: null }, operations)).toEqual({
      can: false,
      why: 'You own this agent; an operator revokes it.',
    });
  });

  it('not for an agent limited to operations no longer configured, nor when nothing is configured', () => {
    expect(agentRevokeRight('web:alice', { owners: [], operations: ['removed'] }, operations).can).toBe(false);
    expect(agentRevokeRight('web:alice', { owners: [], operations: null }, []).can).toBe(false);
  });
});
