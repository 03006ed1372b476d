import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { advanceBetweenJobs } from '../support/outbox.js';
import { configYaml, refundOperation } from '../support/operations.js';
import type { FakeSlack } from '../slack/support/fake-slack.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

const MINUTE = 60_000;
const WAIT = { timeout: 20_000, interval: 50 };

const CONFIG = configYaml([
  refundOperation({
    expiresIn: '2h',
    approvers: ['slack:U0ALICE'],
    slack: 'C0KEYS',
    remind: ['10m', '30m'],
    escalate: { after: '1h', approvers: ['slack:group:S0FINANCE'], slack: 'C0ESCALATE' },
  }),
]);

describe.each(drivers)('reminders and escalation (%s)', (driver) => {
  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let apiKey: string;
  const clock = manualClock();

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, clock, configYaml: CONFIG, outboxPollMs: 20 });
    ({ fake, apiKey } = twokey);
  });
  afterAll(() => twokey?.close());

  const propose = async () =>
    (await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { amount_cents: 5000 } } })).body.id as string;
  const texts = (filter: (args: Record<string, unknown>) => boolean) =>
    fake
      .callsTo('chat.postMessage')
      .filter((call) => filter(call.args))
      .map((call) => String(call.args.text));
  const auditTypes = async (id: string) => (await twokey.services.store.listAudit({ proposalId: id })).map((e) => e.type);

  it('re-pings at 10 and 30 minutes in the thread, escalates at 1 h where configured, then expires without consent', async () => {
    const id = await propose();
    await vi.waitFor(() => expect(texts((a) => !a.thread_ts && JSON.stringify(a.blocks ?? []).includes(id))).toHaveLength(1), WAIT);
    const thread = (a: Record<string, unknown>) => Boolean(a.thread_ts) && String(a.text).includes(id) && String(a.text).startsWith(':bell:');

    await advanceBetweenJobs(clock, twokey.services.jobs, 10 * MINUTE - 1);
    await twokey.outbox.runOnce();
    expect(texts(thread)).toHaveLength(0);
    await advanceBetweenJobs(clock, twokey.services.jobs, 1);
    await vi.waitFor(() => expect(texts(thread)).toHaveLength(1), WAIT);
    expect(texts(thread)[0]).toMatch(/^:bell: Reminder <@U0ALICE>: \*refund\*/);
    // The message itself shows it.
    await vi.waitFor(() => expect(JSON.stringify(fake.callsTo('chat.update').at(-1)?.args.blocks)).toContain('reminded 1×'), WAIT);

    await advanceBetweenJobs(clock, twokey.services.jobs, 20 * MINUTE);
    await vi.waitFor(() => expect(texts(thread)).toHaveLength(2), WAIT);

    await advanceBetweenJobs(clock, twokey.services.jobs, 30 * MINUTE);
    await vi.waitFor(() => expect(texts((a) => a.channel === 'C0ESCALATE')).toHaveLength(1), WAIT);
    expect(texts((a) => a.channel === 'C0ESCALATE')[0]).toMatch(/^:rotating_light: Escalated to <!subteam\^S0FINANCE>, who may now decide/);
    expect(await twokey.services.proposals.get(id)).toMatchObject({ status: 'pending', reminders: 2, approvers: ['slack:U0ALICE', 'slack:group:S0FINANCE'] });
    expect(await auditTypes(id)).toEqual(['proposal.created', 'proposal.reminded', 'proposal.reminded', 'proposal.escalated']);

    await advanceBetweenJobs(clock, twokey.services.jobs, 60 * MINUTE);
    await twokey.services.proposals.expireDue();
    const view = await twokey.request('GET', `/v1/proposals/${id}`, { apiKey });
    expect(view.body).toMatchObject({ status: 'expired', outcome: { outcome: 'expired', userConsent: false, retryable: false, decidedBy: [] } });
    // Nothing more is sent for an expired proposal.
    await twokey.outbox.runOnce();
    expect(texts(thread)).toHaveLength(2);
  });

  it('after escalation, a member of the added group may decide; before it, not', async () => {
    const id = await propose();
    const finance = { identity: 'slack:U0FINN', memberOf: ['slack:group:S0FINANCE'], via: 'test' };
    await expect(twokey.services.proposals.approve(id, finance)).rejects.toMatchObject({ code: 'not_an_approver' });
    clock.advance(60 * MINUTE);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(id)).escalatedAt).not.toBeNull(), WAIT);
    const decided = await twokey.services.proposals.approve(id, finance);
    expect(decided.proposal.status).toBe('committed');
  });

  it('a proposal decided before its reminder gets no reminder', async () => {
    const id = await propose();
    await twokey.services.proposals.approve(id, { identity: 'slack:U0ALICE', via: 'test' });
    clock.advance(2 * 60 * MINUTE);
    await twokey.outbox.runOnce();
    await twokey.outbox.runOnce();
    expect(await auditTypes(id)).not.toContain('proposal.reminded');
    expect(texts((a) => Boolean(a.thread_ts) && String(a.text).includes(id) && String(a.text).includes('Reminder'))).toHaveLength(0);
  });
});
