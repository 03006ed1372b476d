import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { EXECUTING_EDIT_DELAY_MS, jobsForChange } from '../../src/core/effects.js';
import { agentRecord, proposalRecord } from '../support/records.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';

/**
 * `jobsForChange` (src/core/effects.ts): the one place that decides which outbox jobs a proposal's
 * state change queues, given its operation and the chat platforms wired in (by name).
 */

const operationOf = (yaml: string) => {
  const [operation] = parseConfig(configYaml([yaml]), {}, 'test.yaml').operations;
  if (!operation) throw new Error('no operation');
  return operation;
};

const both = operationOf(
  deleteWorkspaceOperation({
    approvers: ['slack:U0ALICE'],
    slack: 'C0APPROVALS',
    discord: '123456789012345678',
    remind: ['1m', '2m'],
    escalate: { after: '3m', approvers: ['slack:U0BOB'], slack: 'C0ESCALATE' },
    expiresIn: '5m',
  }),
);
const at = new Date('2026-11-23T10:00:00.000Z');
const bothWired = { operation: both, chatPlatforms: new Set(['slack', 'discord'] as const), at };
const later = (ms: number) => new Date(at.getTime() + ms);
const proposed = { type: 'proposed', agent: agentRecord('agt_1', at) } as const;

describe('the jobs a state change queues', () => {
  it('at propose time: the follow-ups of a proposal left to people, then its message on each platform', () => {
    const proposal = proposalRecord({ createdAt: at });
    const jobs = jobsForChange(proposal, proposed, bothWired);
    // Its first post, on each platform, may run from what the change knows: the row as inserted, no approval yet.
    const firstOfItsKey = { known: { proposal, agent: proposed.agent, approvals: [] } };
    expect(jobs).toEqual([
      { kind: 'proposal.remind', payload: { proposalId: 'prp_1', index: 0 }, runAt: later(60_000) },
      { kind: 'proposal.remind', payload: { proposalId: 'prp_1', index: 1 }, runAt: later(120_000) },
      { kind: 'proposal.escalate', payload: { proposalId: 'prp_1' }, runAt: later(180_000) },
      { kind: 'chat.sync', payload: { proposalId: 'prp_1', platform: 'slack' }, orderingKey: 'chat:slack:prp_1', coalesce: true, firstOfItsKey },
      { kind: 'chat.sync', payload: { proposalId: 'prp_1', platform: 'discord' }, orderingKey: 'chat:discord:prp_1', coalesce: true, firstOfItsKey },
    ]);
  });

  it('a proposal decided at propose time by a rule gets no follow-ups, and no message when its operation says silent', () => {
    const decided = proposalRecord({ createdAt: at, status: 'approved', decidedBy: 'policy:delete_workspace:0', decidedAt: at });
    const jobs = jobsForChange(decided, proposed, bothWired);
    expect(jobs.map((job) => job.kind)).toEqual(['chat.sync', 'chat.sync']);
    // Decided already, it is posted from the row as stored (a result is rendered as the database keeps it).
    expect(jobs.filter((job) => 'firstOfItsKey' in job)).toEqual([]);
    expect(jobsForChange(decided, proposed, { ...bothWired, operation: { ...both, automaticDecisions: 'silent' } })).toEqual([]);
  });

  it('only on the platforms both wired in and configured for the operation', () => {
    const slackOnly = { operation: both, chatPlatforms: new Set(['slack'] as const), at };
    expect(jobsForChange(proposalRecord(), { type: 'changed' }, slackOnly).map((job) => job.payload)).toEqual([{ proposalId: 'prp_1', platform: 'slack' }]);
    const noDiscordChannel = { ...bothWired, operation: { ...both, approval: { ...both.approval, discord: undefined } } };
    expect(jobsForChange(proposalRecord(), { type: 'changed' }, noDiscordChannel).map((job) => job.orderingKey)).toEqual(['chat:slack:prp_1']);
    expect(jobsForChange(proposalRecord(), { type: 'changed' }, { operation: undefined, chatPlatforms: new Set(['slack'] as const), at })).toEqual([]);
  });

  it("on expiry (and every final state) the message is edited and the agent's callback queued, keyed by agent and host", () => {
    const expired = proposalRecord({ status: 'expired', callbackUrl: 'https://Hooks.Example:8443/twokey' });
    expect(jobsForChange(expired, { type: 'changed' }, bothWired).slice(2)).toEqual([
      {
        kind: 'callback.deliver',
        payload: { proposalId: 'prp_1', status: 'expired', agentId: 'agt_1', destination: 'agt_1 hooks.example:8443' },
        orderingKey: 'callback:prp_1',
      },
    ]);
    // Not final: no callback.
    const approved = proposalRecord({ status: 'approved', callbackUrl: 'https://hooks.example/twokey' });
    expect(jobsForChange(approved, { type: 'changed' }, bothWired).map((job) => job.kind)).toEqual(['chat.sync', 'chat.sync']);
  });

  it('an execution starting edits the message a moment later, so one that ends sooner is shown in one edit', () => {
    const executing = proposalRecord({ status: 'executing' });
    expect(jobsForChange(executing, { type: 'changed' }, bothWired).map((job) => [job.kind, job.runAt])).toEqual([
      ['chat.sync', later(EXECUTING_EDIT_DELAY_MS)],
      ['chat.sync', later(EXECUTING_EDIT_DELAY_MS)],
    ]);
    // Its outcome is edited at once (coalesced into the waiting edit when that has not run yet).
    const committed = proposalRecord({ status: 'committed' });
    expect(jobsForChange(committed, { type: 'changed' }, bothWired).map((job) => job.runAt)).toEqual([undefined, undefined]);
  });

  it('a follow-up edits the message, then pings next to it on the same key; an escalation also names its own channel', () => {
    const change = { type: 'followed_up', followUp: { kind: 'escalate', mention: ['slack:U0BOB'] } } as const;
    const jobs = jobsForChange(proposalRecord(), change, bothWired);
    expect(jobs.map((job) => [job.kind, job.orderingKey])).toEqual([
      ['chat.sync', 'chat:slack:prp_1'],
      ['chat.sync', 'chat:discord:prp_1'],
      ['chat.followup', 'chat:slack:prp_1'],
      ['chat.followup', 'chat:discord:prp_1'],
    ]);
    expect(jobs.slice(2).map((job) => job.payload)).toEqual([
      { proposalId: 'prp_1', platform: 'slack', kind: 'escalate', mention: ['slack:U0BOB'], channel: 'C0ESCALATE' },
      { proposalId: 'prp_1', platform: 'discord', kind: 'escalate', mention: ['slack:U0BOB'], channel: null },
    ]);
    const reminder = jobsForChange(proposalRecord(), { type: 'followed_up', followUp: { kind: 'remind', mention: [] } }, bothWired);
    expect(reminder.filter((job) => job.kind === 'chat.followup').map((job) => job.payload)).toEqual([
      { proposalId: 'prp_1', platform: 'slack', kind: 'remind', mention: [], channel: null },
      { proposalId: 'prp_1', platform: 'discord', kind: 'remind', mention: [], channel: null },
    ]);
  });
});
