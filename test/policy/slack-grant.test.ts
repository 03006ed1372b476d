import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { drivers } from '../support/database.js';
import { configYaml, refundOperation } from '../support/operations.js';
import type { FakeSlack } from '../slack/support/fake-slack.js';
import { buttonClick, grantSubmission, interactionBody, type SlackPoster } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

const WAIT = { timeout: 20_000, interval: 50 };
const HOUR = 3_600_000;

const CONFIG = configYaml([
  refundOperation({ expiresIn: '1h', approvers: ['slack:U0ALICE'], slack: 'C0KEYS', grants: { maxDuration: '8h', durations: ['15m', '1h', '8h'] } }),
]);

describe.each(drivers)('"Approve for 1 h" from Slack (%s)', (driver) => {
  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let apiKey: string;
  let post: SlackPoster;

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, configYaml: CONFIG, outboxPollMs: 20 });
    ({ fake, apiKey, post } = twokey);
  });
  afterAll(() => twokey?.close());

  const propose = async (amount: number) =>
    (await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { amount_cents: amount } } })).body;
  const postsOf = (id: string) => fake.callsTo('chat.postMessage').filter((c) => !c.args.thread_ts && JSON.stringify(c.args.blocks ?? []).includes(id));

  it('the button opens a modal with the configured durations; submitting approves and covers the next proposals', async () => {
    const first = await propose(500);
    await vi.waitFor(() => expect(postsOf(first.id)).toHaveLength(1), WAIT);
    const buttons = JSON.stringify(postsOf(first.id)[0]?.args.blocks);
    expect(buttons).toContain('"action_id":"twokey_grant"');
    expect(buttons).toContain('Approve for 15 min…');

    expect((await post(interactionBody(buttonClick({ actionId: 'twokey_grant', proposalId: first.id, userId: 'U0ALICE', channel: 'C0KEYS' })))).status).toBe(
      200,
    );
    await vi.waitFor(() => expect(fake.callsTo('views.open')).toHaveLength(1), WAIT);
    const modal = JSON.stringify(fake.callsTo('views.open')[0]?.args.view);
    expect(modal).toContain('twokey_grant_modal');
    expect(modal).toContain('"text":"1 h"');
    expect(modal).toContain('"text":"8 h"');

    expect((await post(interactionBody(grantSubmission(first.id, 'U0ALICE', HOUR, '2')))).status).toBe(200);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(first.id)).status).toBe('committed'), WAIT);
    // The submission is stored, then decided: the approval first, the grant right after it.
    const [entry] = await vi.waitFor(async () => {
      const listed = await twokey.services.grants.list({});
      expect(listed).toHaveLength(1);
      return listed;
    }, WAIT);
    expect(entry?.grant).toMatchObject({ maxUses: 2, durationMs: HOUR });
    expect(entry?.approvals.map((a) => a.approver)).toEqual(['slack:U0ALICE']);

    const covered = await propose(700);
    expect(covered).toMatchObject({ status: 'committed', outcome: { decidedBy: [`grant:${entry?.grant.id}`] } });
    // Shown in chat as a compact message, without buttons.
    await vi.waitFor(() => expect(postsOf(covered.id)).toHaveLength(1), WAIT);
    const compact = JSON.stringify(postsOf(covered.id)[0]?.args.blocks);
    expect(compact).toContain('auto-approved by grant');
    expect(compact).not.toContain('twokey_approve');
    await twokey.services.grants.revoke(entry?.grant.id ?? '', 'slack:U0ALICE');
  });

  it('someone who is not an approver cannot grant: nothing changes', async () => {
    const proposal = await propose(900);
    await vi.waitFor(() => expect(postsOf(proposal.id)).toHaveLength(1), WAIT);
    expect((await post(interactionBody(grantSubmission(proposal.id, 'U0MALLORY', HOUR, null)))).status).toBe(200);
    expect((await twokey.services.proposals.get(proposal.id)).status).toBe('pending');
    expect((await twokey.services.grants.list({})).filter((e) => e.grant.sourceProposalId === proposal.id)).toHaveLength(0);
  });
});
