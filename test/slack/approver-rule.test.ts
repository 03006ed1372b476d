import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { buttonClick, interactionBody } from './support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

// Alice and Carol are both named approvers; only Carol is in the finance user group the rule names.
const CONFIG = configYaml([
  refundOperation({
    approvers: ['slack:U0ALICE', 'slack:U0CAROL'],
    slack: 'C0APPROVALS',
    commit: 'on_approve',
    approverRule: {
      when: 'params.amount_cents <= 100000 || "slack:group:S0FIN" in approver.groups',
      reason: 'refunds over $1,000 need someone in the finance user group',
    },
  }),
]);

const WAIT = { timeout: 5_000, interval: 20 };

describe.each(drivers)('approver rules at a Slack click (%s)', (driver) => {
  let twokey: SlackTwokey;

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, clock: manualClock(), configYaml: CONFIG, agent: { name: 'refund-bot', owners: ['slack:U0OWNER'] } });
    twokey.fake.usergroups.set('S0FIN', ['U0CAROL']);
  });
  afterAll(() => twokey?.close());

  const click = (proposalId: string, userId: string) => twokey.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId, userId })));
  const ephemeralsTo = (user: string) => twokey.fake.callsTo('chat.postEphemeral').filter((c) => c.args.user === user);

  it('a named approver outside the group is told the rule’s reason; a member of the group approves', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey: twokey.apiKey, body: { operation: 'refund', params: { amount_cents: 250_000 } } });
    expect(proposed.status).toBe(201);
    const id = (proposed.body as { id: string }).id;

    expect((await click(id, 'U0ALICE')).status).toBe(200);
    await vi.waitFor(() => expect(ephemeralsTo('U0ALICE')).toHaveLength(1), WAIT);
    const told = String(ephemeralsTo('U0ALICE')[0]?.args.text);
    expect(told).toContain('refunds over $1,000 need someone in the finance user group');
    expect(told).toContain('Nothing was changed');
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');

    expect((await click(id, 'U0CAROL')).status).toBe(200);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(id)).status).toBe('committed'), WAIT);
    const [approval] = await twokey.services.store.listApprovals(id);
    expect(approval).toMatchObject({ approver: 'slack:U0CAROL', matchedRule: 'slack:U0CAROL' });
    // The group was looked up for the rule, though Carol is on the list by name.
    expect(twokey.fake.callsTo('usergroups.users.list').some((call) => call.args.usergroup === 'S0FIN')).toBe(true);
  });

  it('a small refund needs no group', async () => {
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey: twokey.apiKey, body: { operation: 'refund', params: { amount_cents: 5_000 } } });
    const id = (proposed.body as { id: string }).id;
    expect((await click(id, 'U0ALICE')).status).toBe(200);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(id)).status).toBe('committed'), WAIT);
  });
});
