import type { AgentRecord, ProposalRecord } from '../../src/core/model.js';

/**
 * A pending `delete_workspace` proposal as the store holds it, for unit tests of code that reads
 * proposals: each test overrides only the fields its case is about.
 */
export function proposalRecord(patch: Partial<ProposalRecord> = {}): ProposalRecord {
  const createdAt = patch.createdAt ?? new Date('2026-11-23T10:00:00.000Z');
  return {
    id: 'prp_1',
    agentId: 'agt_1',
    operation: 'delete_workspace',
    params: { workspace: 'w' },
    paramsHash: 'h',
    summary: 's',
    summaryHash: 'h',
    cost: null,
    confirmationType: 'approval',
    tokenHash: 'h',
    status: 'pending',
    quorum: 1,
    commitMode: 'on_approve',
    callbackUrl: null,
    createdAt,
    expiresAt: new Date(createdAt.getTime() + 300_000),
    consumedAt: null,
    decidedBy: null,
    decidedAt: null,
    decisionReason: null,
    result: null,
    error: null,
    executionAttempts: 0,
    leaseUntil: null,
    updatedAt: createdAt,
    approvers: null,
    reminders: 0,
    escalatedAt: null,
    ...patch,
  };
}

/** An agent as the store holds it, named by its id, for tests that need one to own their proposals. */
export function agentRecord(id: string, createdAt = new Date('2026-11-23T10:00:00.000Z')): AgentRecord {
  return {
    id,
    name: id,
    keyHash: `hash_${id}`,
    keyPrefix: 'tk_agent_x',
    callbackSecret: 'whsec_test',
    owners: [],
    operations: null,
    createdAt,
    revokedAt: null,
  };
}
