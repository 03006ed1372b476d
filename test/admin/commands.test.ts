import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAdminSocket } from '../../src/admin/client.js';
import { adminCommands } from '../../src/admin/commands.js';
import { runAdminOperation } from '../../src/admin/operations.js';
import { startAdminSocket } from '../../src/admin/socket.js';
import { drivers } from '../support/database.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const CONFIG = configYaml([
  refundOperation({
    customer: true,
    policy: [
      { when: "params.customer == 'blocked'", decide: 'deny', reason: 'this customer is blocked from refunds' },
      { when: 'params.amount_cents > 100000', decide: 'require', quorum: 2 },
      { when: 'params.amount_cents > 50000', decide: 'require', stepUp: 'passkey' },
    ],
    approvers: ['web:alice', 'web:bob'],
  }),
]);

describe.each(drivers)('the operator command table (%s)', (driver) => {
  let twokey: TestTwokey;
  let dir: string;
  let socket: Awaited<ReturnType<typeof startAdminSocket>>;
  const ask = (name: string, input: unknown) => callAdminSocket(dir, name, input);

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, configYaml: CONFIG });
    dir = await mkdtemp(join(tmpdir(), 'twokey-admin-'));
    socket = await startAdminSocket(twokey.services, dir);
  });
  afterAll(async () => {
    await new Promise((done) => socket.close(done));
    await twokey.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('names every command by its own name', () => {
    for (const [name, command] of Object.entries(adminCommands)) expect(command.name).toBe(name);
  });

  it('the socket refuses a bad input naming the field, and nothing changes', async () => {
    await expect(ask('agents.create', { name: 42 })).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/^name: /) });
    await expect(ask('agents.create', { name: 'argus', colour: 'red' })).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('colour'),
    });
    await expect(ask('proposals.approve', { id: 'prp_x', as: 'slack:group:S123' })).rejects.toThrow('--as must name one person');
    await expect(ask('proposals.approve', { id: 'prp_x', as: 'web:alice', grant: 'soon' })).rejects.toThrow('--grant must be a duration');
    await expect(ask('jobs.retry', { id: 'seven' })).rejects.toThrow('job id must be a number');
    await expect(ask('agents.explode', {})).rejects.toThrow('unknown admin operation "agents.explode"');
    expect(await ask('agents.list', {})).toEqual([]);
    expect(await twokey.services.store.listAudit({})).toEqual([]);
  });

  it('runs a command over the socket and in process alike, its answer held to the output schema', async () => {
    const created = adminCommands['agents.create'].output.parse(await ask('agents.create', { name: 'argus', owners: ['web:owner'] }));
    expect(created).toMatchObject({ name: 'argus', owners: ['web:owner'], operations: null });
    expect(adminCommands['agents.create'].print(created).split('\n').at(-1)).toBe(created.apiKey);
    const listed = adminCommands['agents.list'].output.parse(await runAdminOperation(twokey.services, 'agents.list', {}));
    expect(listed.map((agent) => agent.name)).toEqual(['argus']);
    expect(adminCommands['agents.list'].print(listed)).toMatch(/^NAME\s+ID\s+KEYPREFIX/);
  });

  it('policy test prints the explanation the decision records', async () => {
    const tested = adminCommands['policy.test'].output.parse(
      await ask('policy.test', { operation: 'refund', params: '{"customer":"c1","amount_cents":200000}', agent: 'argus' }),
    );
    expect(adminCommands['policy.test'].print(tested).split('\n')).toEqual([
      "rule #0: params.customer == 'blocked' → false",
      'rule #1: params.amount_cents > 100000 → true',
      'decision: require by policy:refund#1; needs 2 of web:alice,web:bob',
    ]);
    // The same proposal, proposed: the audit row says what policy test said.
    const agent = (await twokey.services.store.findAgentByName('argus'))!;
    const { proposal } = await twokey.services.proposals.propose(agent, { operation: 'refund', params: { customer: 'c1', amount_cents: 200000 } });
    const required = (await twokey.services.store.listAudit({ proposalId: proposal.id })).find((event) => event.type === 'policy.required');
    expect(required).toMatchObject({ actor: tested.decidedBy, data: { rule: 'operations[0].policy[1]', quorum: tested.quorum, approvers: tested.approvers } });
    expect(proposal.quorum).toBe(2);
  });

  it('policy test says when the approvals it asks for need a passkey, as the proposal then does', async () => {
    const tested = adminCommands['policy.test'].output.parse(
      await ask('policy.test', { operation: 'refund', params: '{"customer":"c1","amount_cents":60000}', agent: 'argus' }),
    );
    expect(tested).toMatchObject({ decision: 'require', stepUp: 'passkey' });
    expect(adminCommands['policy.test'].print(tested).split('\n').at(-1)).toBe(
      'decision: require by policy:refund#2; needs 1 of web:alice,web:bob, each approving with a passkey',
    );
    const agent = (await twokey.services.store.findAgentByName('argus'))!;
    const { proposal } = await twokey.services.proposals.propose(agent, { operation: 'refund', params: { customer: 'c1', amount_cents: 60000 } });
    expect(proposal.stepUp).toBe('passkey');
    // Below the rule's threshold, nothing asks for a passkey.
    const small = adminCommands['policy.test'].output.parse(
      await ask('policy.test', { operation: 'refund', params: '{"customer":"c1","amount_cents":600}', agent: 'argus' }),
    );
    expect(small.stepUp).toBeUndefined();
  });
});
