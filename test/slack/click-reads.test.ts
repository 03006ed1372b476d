/**
 * A stored Slack click reads its proposal before deciding only when a Slack user group could count:
 * the decider's group lookup needs the proposal's approvers. When no operation names a group
 * (approvers, escalation, policy rule, approver rule) the click is decided without that read, and a
 * proposal made under an earlier configuration that still names one is decided again with the
 * lookup once the first attempt was refused.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { rowsOf } from '../../src/db/rows.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation, upgradePlanOperation } from '../support/operations.js';
import { buttonClick, interactionBody } from './support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

const WAIT = { timeout: 5_000, interval: 20 };
const echo: Executor = { kind: 'local', run: async (request) => ({ done: request.params }) };

const namedOnly = configYaml([upgradePlanOperation({ approvers: ['slack:U0ALICE'], quorum: 1, slack: 'C0APPROVALS', commit: 'on_approve' })]);
// The group is named by another operation's escalation: any named group anywhere makes every click read.
const groupElsewhere = configYaml([
  upgradePlanOperation({ approvers: ['slack:U0ALICE'], quorum: 1, slack: 'C0APPROVALS', commit: 'on_approve' }),
  deleteWorkspaceOperation({
    approvers: ['slack:U0BOB'],
    quorum: 1,
    slack: 'C0DANGER',
    commit: 'on_approve',
    escalate: { after: '10m', approvers: ['slack:group:S0OPS'] },
  }),
]);

/**
 * Records every read of a proposal through the store from now on, whoever makes it (nothing else in a
 * Slack approval reads one that way, so a read the click makes, after an await or not, is seen).
 */
function proposalReadsOf(twokey: SlackTwokey): string[] {
  const reads: string[] = [];
  const store = twokey.services.store;
  const read = store.getProposal.bind(store);
  vi.spyOn(store, 'getProposal').mockImplementation(async (id: string) => {
    reads.push(id);
    return read(id);
  });
  return reads;
}

async function started(driver: (typeof drivers)[number], config: string): Promise<SlackTwokey> {
  const twokey = await startSlackTwokey({ driver, clock: manualClock(), configYaml: config, executorFor: () => echo });
  twokey.fake.usergroups.set('S0OPS', ['U0OPSPERSON']);
  return twokey;
}

async function propose(twokey: SlackTwokey, org: string): Promise<string> {
  const response = await twokey.request('POST', '/v1/proposals', {
    apiKey: twokey.apiKey,
    body: { operation: 'upgrade_plan', params: { org, plan: 'scale' } },
  });
  expect(response.status).toBe(201);
  return response.body.id as string;
}

async function clickApprove(twokey: SlackTwokey, proposalId: string, userId: string): Promise<void> {
  const answer = await twokey.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId, userId })));
  expect(answer.status).toBe(200);
}

/** Read straight from the table: the store's reads are what the spy counts. */
const statusOf = async (twokey: SlackTwokey, id: string) =>
  rowsOf<{ status: string }>(await twokey.services.database.db.execute(sql`select status from proposals where id = ${id}`))[0]?.status;

describe.each(drivers)('a stored Slack click and its proposal read (%s)', (driver) => {
  let named: SlackTwokey;
  let grouped: SlackTwokey;

  beforeAll(async () => {
    named = await started(driver, namedOnly);
    grouped = await started(driver, groupElsewhere);
  }, 180_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await named?.close();
    await grouped?.close();
  });

  it('decides a named approver without reading the proposal when no operation names a Slack group', async () => {
    const reads = proposalReadsOf(named);
    const id = await propose(named, 'acme');
    await clickApprove(named, id, 'U0ALICE');
    await vi.waitFor(async () => expect(await statusOf(named, id)).toBe('committed'), WAIT);
    expect(reads).toEqual([]);
    expect(named.fake.callsTo('usergroups.users.list')).toEqual([]);
  });

  it('reads the proposal for the lookup once any operation names a group', async () => {
    const reads = proposalReadsOf(grouped);
    const id = await propose(grouped, 'globex');
    await clickApprove(grouped, id, 'U0ALICE');
    await vi.waitFor(async () => expect(await statusOf(grouped, id)).toBe('committed'), WAIT);
    expect(reads).toContain(id);
  });

  it('decides again with the group lookup a proposal that names a group the configuration no longer does', async () => {
    const earlier = async (org: string) => {
      const id = await propose(named, org);
      // As a policy rule of an earlier configuration would have left it.
      await named.services.database.db.execute(sql`update proposals set approvers = ${JSON.stringify(['slack:group:S0OPS'])}::jsonb where id = ${id}`);
      return id;
    };
    const member = await earlier('initech');
    await clickApprove(named, member, 'U0OPSPERSON');
    await vi.waitFor(async () => expect(await statusOf(named, member)).toBe('committed'), WAIT);
    const approvals = await named.services.store.listApprovals(member);
    expect(approvals).toEqual([expect.objectContaining({ approver: 'slack:U0OPSPERSON', matchedRule: 'slack:group:S0OPS' })]);

    const outsider = await earlier('umbrella');
    const toldBefore = named.fake.callsTo('chat.postEphemeral').length;
    await clickApprove(named, outsider, 'U0NOBODY');
    // Refused once, told once; the proposal still waits.
    await vi.waitFor(() => expect(named.fake.callsTo('chat.postEphemeral').length).toBe(toldBefore + 1), WAIT);
    const told = named.fake.callsTo('chat.postEphemeral').at(-1);
    expect(told?.args).toMatchObject({ user: 'U0NOBODY' });
    expect(await statusOf(named, outsider)).toBe('pending');
    expect(await named.services.store.listApprovals(outsider)).toEqual([]);
  });
});
