import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Executor } from '../../src/core/executor.js';
import { manualClock } from '../support/clock.js';
import { outboxAtRest } from '../support/outbox.js';
import { drivers } from '../support/database.js';
import { USD_COST, configYaml, deleteWorkspaceOperation, upgradePlanOperation } from '../support/operations.js';
import type { FakeSlack, SlackCall } from './support/fake-slack.js';
import {
  BOT_TOKEN,
  LEGACY_TOKEN,
  RESPONSE_URL,
  SIGNING_SECRET,
  buttonClick,
  interactionBody,
  rejectSubmission,
  slackHeaders,
  type SlackPoster,
} from './support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

const CONFIG = configYaml([
  upgradePlanOperation({
    confirmationType: 'payment',
    amountCents: true,
    cost: USD_COST,
    expiresIn: '5m',
    approvers: ['slack:U0ALICE', 'slack:U0OWNER', 'slack:group:S0OPS'],
    quorum: 1,
    slack: 'C0APPROVALS',
    commit: 'on_approve',
  }),
  deleteWorkspaceOperation({ confirmationType: 'approval', approvers: ['slack:U0ALICE', 'slack:U0BOB'], quorum: 2, slack: 'C0DANGER', commit: 'on_approve' }),
]);

const WAIT = { timeout: 5_000, interval: 20 };

const blocksText = (call: SlackCall | undefined) => JSON.stringify(call?.args.blocks ?? []);
const actionIds = (call: SlackCall | undefined): string[] =>
  ((call?.args.blocks ?? []) as any[]).filter((b) => b.type === 'actions').flatMap((b) => b.elements.map((e: any) => e.action_id));

describe.each(drivers)('Slack approver (%s)', (driver) => {
  const clock = manualClock();
  const runs: string[] = [];
  let failuresLeft = 0;
  let gate: Promise<void> | null = null;
  const executor: Executor = {
    kind: 'local',
    async run(request) {
      if (gate) await gate;
      runs.push(request.proposalId);
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        throw new Error('billing API answered 503');
      }
      return { done: true, target: request.params.org ?? request.params.workspace };
    },
  };

  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let apiKey: string;
  let post: SlackPoster;

  beforeAll(async () => {
    twokey = await startSlackTwokey({
      driver,
      clock,
      configYaml: CONFIG,
      executorFor: () => executor,
      env: { TWOKEY_PUBLIC_URL: 'https://twokey.example.test' },
      agent: { name: 'billing-bot', owners: ['slack:U0OWNER'] },
    });
    ({ fake, apiKey, post } = twokey);
    fake.usergroups.set('S0OPS', ['U0OPSPERSON', 'U0OTHER']);
  });
  afterAll(() => twokey?.close());

  async function propose(operation: string, params: Record<string, unknown>): Promise<{ id: string; confirmToken: string }> {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation, params } });
    expect(response.status).toBe(201);
    return response.body;
  }

  const messagesOf = (id: string) => fake.callsTo('chat.postMessage').filter((c) => !c.args.thread_ts && blocksText(c).includes(id));
  const updatesOf = (id: string) => fake.callsTo('chat.update').filter((c) => blocksText(c).includes(id));
  const ephemeralsTo = (user: string) => fake.callsTo('chat.postEphemeral').filter((c) => c.args.user === user);
  const statusOf = async (id: string) => (await twokey.services.proposals.get(id)).status;

  async function postedMessage(id: string): Promise<SlackCall> {
    return vi.waitFor(() => {
      const [message] = messagesOf(id);
      if (!message) throw new Error('not posted yet');
      return message;
    }, WAIT);
  }

  /** Waits until the newest edit of the message satisfies `check`. */
  async function edited(id: string, check: (text: string) => boolean): Promise<SlackCall> {
    return vi.waitFor(() => {
      const latest = updatesOf(id).at(-1);
      if (!latest || !check(blocksText(latest))) throw new Error('message not edited as expected yet');
      return latest;
    }, WAIT);
  }

  const click = (actionId: string, proposalId: string, userId: string, headers?: Record<string, string>, channel?: string) =>
    post(interactionBody(buttonClick({ actionId, proposalId, userId, ...(channel ? { channel } : {}) })), headers ? { headers } : {});

  it('posts one message to the operation channel with both buttons and the summary, and no secret', async () => {
    const { id, confirmToken } = await propose('upgrade_plan', { org: 'acme', plan: 'scale', amount_cents: 4900 });
    const message = await postedMessage(id);

    expect(message.args.channel).toBe('C0APPROVALS');
    expect(message.authorization).toBe(`Bearer ${BOT_TOKEN}`);
    const text = blocksText(message);
    expect(text).toContain('billing-bot is requesting to upgrade acme to the scale plan.');
    expect(text).toContain('$49.00');
    expect(text).toContain('https://twokey.example.test/console/proposals/');
    expect(text).toMatch(/<!date\^\d+\^\{date_short_pretty\} \{time\}\|/);
    const buttons = (message.args.blocks as any[]).find((b) => b.type === 'actions').elements;
    expect(buttons).toEqual([
      expect.objectContaining({ action_id: 'twokey_approve', style: 'primary', value: id, confirm: expect.objectContaining({ title: expect.anything() }) }),
      expect.objectContaining({ action_id: 'twokey_reject', style: 'danger', value: id }),
    ]);
    const everything = JSON.stringify(message.args);
    expect(everything).not.toContain('tk_conf_');
    expect(everything).not.toContain('tk_agent_');
    expect(everything).not.toContain(confirmToken);
    expect(everything).not.toContain(apiKey);

    // Posted once, not once per change notification.
    await new Promise((done) => setTimeout(done, 200));
    expect(messagesOf(id)).toHaveLength(1);
  });

  it("commits once under 20 concurrent clicks by one approver plus Slack's retries", async () => {
    const { id } = await propose('upgrade_plan', { org: 'globex', plan: 'pro' });
    await postedMessage(id);
    const clicks = Array.from({ length: 20 }, () => click('twokey_approve', id, 'U0ALICE'));
    const retries = [1, 2, 3].map((n) => click('twokey_approve', id, 'U0ALICE', { 'x-slack-retry-num': String(n), 'x-slack-retry-reason': 'http_timeout' }));
    const answers = await Promise.all([...clicks, ...retries]);
    expect(answers.map((a) => a.status)).toEqual(Array(23).fill(200));

    await vi.waitFor(async () => expect(await statusOf(id)).toBe('committed'), WAIT);
    await new Promise((done) => setTimeout(done, 200));
    expect(runs.filter((r) => r === id)).toHaveLength(1);
    expect(await twokey.services.store.listApprovals(id)).toHaveLength(1);
    const final = await edited(id, (text) => text.includes('Committed'));
    expect(actionIds(final)).toEqual([]);
    expect(blocksText(final)).toContain('<@U0ALICE>');
    expect(ephemeralsTo('U0ALICE').filter((c) => String(c.args.text).includes('failed'))).toHaveLength(0);
  });

  it('answers the click before deciding: a slow operation does not hold the ack', async () => {
    const { id } = await propose('upgrade_plan', { org: 'soylent', plan: 'pro' });
    await postedMessage(id);
    let open = () => {};
    gate = new Promise<void>((resolve) => (open = resolve));
    try {
      const answer = await click('twokey_approve', id, 'U0ALICE');
      expect(answer).toMatchObject({ status: 200, body: '' });
      expect(runs).not.toContain(id);
    } finally {
      gate = null;
      open();
    }
    await vi.waitFor(async () => expect(await statusOf(id)).toBe('committed'), WAIT);
  });

  it("refuses a non-approver's and an owner's click privately and changes nothing", async () => {
    const { id } = await propose('upgrade_plan', { org: 'initech', plan: 'pro' });
    await postedMessage(id);
    const approveMallory = await click('twokey_approve', id, 'U0MALLORY');
    const approveOwner = await click('twokey_approve', id, 'U0OWNER');
    const rejectMallory = await click('twokey_reject', id, 'U0MALLORY');
    expect([approveMallory.status, approveOwner.status, rejectMallory.status]).toEqual([200, 200, 200]);

    await vi.waitFor(() => expect(ephemeralsTo('U0MALLORY')).toHaveLength(2), WAIT);
    await vi.waitFor(() => expect(ephemeralsTo('U0OWNER')).toHaveLength(1), WAIT);
    for (const ephemeral of ephemeralsTo('U0MALLORY')) {
      expect(ephemeral.args).toMatchObject({ channel: 'C0APPROVALS', text: expect.stringContaining('not an approver') });
    }
    expect(ephemeralsTo('U0OWNER')[0]?.args.text).toContain('You own the agent');
    expect(fake.callsTo('views.open')).toHaveLength(0);
    expect(await statusOf(id)).toBe('pending');
    expect(await twokey.services.store.listApprovals(id)).toHaveLength(0);
    expect(runs).not.toContain(id);
    expect(updatesOf(id)).toHaveLength(0);
  });

  it('accepts a member of an approving user group, resolved through usergroups.users.list', async () => {
    const { id } = await propose('upgrade_plan', { org: 'hooli', plan: 'enterprise' });
    await postedMessage(id);
    expect((await click('twokey_approve', id, 'U0OPSPERSON')).status).toBe(200);
    await vi.waitFor(async () => expect(await statusOf(id)).toBe('committed'), WAIT);
    expect(await twokey.services.store.listApprovals(id)).toEqual([
      expect.objectContaining({ approver: 'slack:U0OPSPERSON', matchedRule: 'slack:group:S0OPS' }),
    ]);
    expect(fake.callsTo('usergroups.users.list').at(-1)?.args).toMatchObject({ usergroup: 'S0OPS' });
  });

  it('reaches a quorum of 2 through two approvers, the message showing 1 of 2 in between', async () => {
    const { id } = await propose('delete_workspace', { workspace: 'staging' });
    const message = await postedMessage(id);
    expect(message.args.channel).toBe('C0DANGER');
    expect(JSON.stringify(message.args.blocks)).not.toContain('"confirm"');

    await click('twokey_approve', id, 'U0ALICE', undefined, 'C0DANGER');
    const halfway = await edited(id, (text) => text.includes('1 of 2'));
    expect(blocksText(halfway)).toContain('<@U0ALICE>');
    expect(actionIds(halfway)).toEqual(['twokey_approve', 'twokey_reject']);
    expect(await statusOf(id)).toBe('pending');

    await click('twokey_approve', id, 'U0BOB', undefined, 'C0DANGER');
    const done = await edited(id, (text) => text.includes('Committed'));
    expect(blocksText(done)).toContain('2 of 2');
    expect(actionIds(done)).toEqual([]);
    expect(runs.filter((r) => r === id)).toHaveLength(1);
  });

  it('rejects with the reason from the modal; the agent reads it and the message shows it', async () => {
    const { id } = await propose('upgrade_plan', { org: 'umbrella', plan: 'scale' });
    await postedMessage(id);

    await click('twokey_reject', id, 'U0ALICE');
    const opened = await vi.waitFor(() => {
      const call = fake.callsTo('views.open').find((c) => c.args.view.private_metadata === id);
      if (!call) throw new Error('no modal yet');
      return call;
    }, WAIT);
    expect(opened.args.trigger_id).toMatch(/^trigger-/);
    expect(opened.args.view).toMatchObject({ type: 'modal', callback_id: 'twokey_reject_modal' });
    expect(await statusOf(id)).toBe('pending');

    const submitted = await post(interactionBody(rejectSubmission({ proposalId: id, userId: 'U0ALICE', reason: 'Budget freeze until Q3' })));
    expect(submitted).toMatchObject({ status: 200, body: '' });

    // Stored before the answer, decided right after it.
    await vi.waitFor(async () => {
      const seen = await twokey.request('GET', `/v1/proposals/${id}`, { apiKey });
      expect(seen.body).toMatchObject({ status: 'rejected', decision: { by: 'slack:U0ALICE', reason: 'Budget freeze until Q3' } });
    }, WAIT);
    const final = await edited(id, (text) => text.includes('Rejected'));
    expect(blocksText(final)).toContain('Budget freeze until Q3');
    expect(actionIds(final)).toEqual([]);

    // The decision trail follows as a thread reply once the proposal is final.
    const trail = await vi.waitFor(() => {
      const reply = fake.callsTo('chat.postMessage').find((c) => c.args.thread_ts && String(c.args.text).includes(id));
      if (!reply) throw new Error('no trail yet');
      return reply;
    }, WAIT);
    expect(trail.args.text).toContain('proposal.rejected');
    // The final edit's version was recorded with the trail (one write): syncing again changes nothing.
    // (Once the job that posted the trail has recorded it: the fake sees the post before that write.)
    await outboxAtRest(twokey.services.jobs, clock);
    const editsSoFar = updatesOf(id).length;
    const trailsSoFar = fake.callsTo('chat.postMessage').filter((c) => c.args.thread_ts).length;
    await twokey.chatSync.sync(id, 'slack');
    expect(updatesOf(id)).toHaveLength(editsSoFar);
    expect(fake.callsTo('chat.postMessage').filter((c) => c.args.thread_ts)).toHaveLength(trailsSoFar);

    // A second submission (another tab) is refused inside the modal, not silently.
    const again = await post(interactionBody(rejectSubmission({ proposalId: id, userId: 'U0ALICE', reason: 'again' })));
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toMatchObject({ response_action: 'errors', errors: { twokey_reason: expect.stringContaining('rejected') } });
  });

  it('edits the message when the proposal expires', async () => {
    const { id } = await propose('upgrade_plan', { org: 'stark', plan: 'pro' });
    await postedMessage(id);
    clock.advance(5 * 60_000 + 1_000);
    expect(await twokey.services.proposals.expireDue()).toBeGreaterThanOrEqual(1);
    const final = await edited(id, (text) => text.includes('Expired'));
    expect(actionIds(final)).toEqual([]);
    expect(await statusOf(id)).toBe('expired');

    // A late click on the stale message is refused privately.
    await click('twokey_approve', id, 'U0ALICE');
    await vi.waitFor(() => expect(ephemeralsTo('U0ALICE').some((c) => String(c.args.text).includes('Nothing was changed'))).toBe(true), WAIT);
  });

  it('shows Retry after an executor failure, and a Retry click commits', async () => {
    const { id } = await propose('upgrade_plan', { org: 'wayne', plan: 'scale' });
    await postedMessage(id);
    failuresLeft = 1;
    await click('twokey_approve', id, 'U0ALICE');

    const failed = await edited(id, (text) => text.includes('Execution failed'));
    expect(blocksText(failed)).toContain('billing API answered 503');
    expect(actionIds(failed)).toEqual(['twokey_retry']);
    expect(await twokey.services.proposals.get(id)).toMatchObject({ status: 'approved', consumedAt: null });
    await vi.waitFor(() => expect(ephemeralsTo('U0ALICE').some((c) => String(c.args.text).includes('billing API answered 503'))).toBe(true), WAIT);

    // Retry follows the approve rules: an outsider cannot run it.
    const told = ephemeralsTo('U0MALLORY').length;
    await click('twokey_retry', id, 'U0MALLORY');
    await vi.waitFor(() => expect(ephemeralsTo('U0MALLORY')).toHaveLength(told + 1), WAIT);
    expect(ephemeralsTo('U0MALLORY').at(-1)?.args.text).toContain('not an approver');
    expect(runs.filter((r) => r === id)).toHaveLength(1);

    await click('twokey_retry', id, 'U0ALICE');
    await vi.waitFor(async () => expect(await statusOf(id)).toBe('committed'), WAIT);
    const final = await edited(id, (text) => text.includes('Committed'));
    expect(actionIds(final)).toEqual([]);
    expect(runs.filter((r) => r === id)).toHaveLength(2);
  });

  describe('signatures', () => {
    it('answers 401 and nothing else to a bad signature, and to timestamps 6 minutes old or ahead', async () => {
      const { id } = await propose('upgrade_plan', { org: 'cyberdyne', plan: 'pro' });
      await postedMessage(id);
      const body = interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE' }));
      const now = Math.floor(clock().getTime() / 1000);

      const refused = await Promise.all([
        post(body, { secret: 'not-the-signing-secret' }),
        post(body, { unixSeconds: now - 360 }),
        post(body, { unixSeconds: now + 360 }),
        post(body, { headers: { 'x-slack-signature': 'v0=abc' } }),
        post(`${body}&tampered=1`, { headers: slackHeaders(body, now) }),
      ]);
      for (const answer of refused) expect(answer).toMatchObject({ status: 401, body: '' });

      await new Promise((done) => setTimeout(done, 200));
      expect(await statusOf(id)).toBe('pending');
      expect(await twokey.services.store.listApprovals(id)).toHaveLength(0);
    });

    it('takes a form body with a charset parameter, and tells a click on an unknown proposal so', async () => {
      const body = interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: 'prp_doesnotexist', userId: 'U0ALICE' }));
      const answer = await post(body, { contentType: 'application/x-www-form-urlencoded; charset=utf-8' });
      expect(answer).toMatchObject({ status: 200, body: '' });
      await vi.waitFor(() => expect(ephemeralsTo('U0ALICE').some((c) => String(c.args.text).includes('no proposal `prp_doesnotexist`'))).toBe(true), WAIT);
    });

    it('answers url_verification with the challenge', async () => {
      const body = JSON.stringify({ token: LEGACY_TOKEN, challenge: 'c-3pO-challenge', type: 'url_verification' });
      const answer = await post(body, { contentType: 'application/json' });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ challenge: 'c-3pO-challenge' });

      const unsigned = await post(body, { contentType: 'application/json', secret: 'wrong' });
      expect(unsigned).toMatchObject({ status: 401, body: '' });
    });
  });

  it('logs hold no bot token, signing secret, response_url or payload token', () => {
    const logs = twokey.logs.join('');
    // The suite did log its Slack traffic, so the absence below means something.
    expect(logs).toContain('Slack approval');
    expect(logs).toContain('bad signature');
    for (const secret of [BOT_TOKEN, SIGNING_SECRET, RESPONSE_URL, 'RESPONSEURLSECRET', LEGACY_TOKEN, 'tk_conf_', 'tk_agent_']) {
      expect(logs).not.toContain(secret);
    }
  });
});
