import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { configYaml, refundOperation } from '../support/operations.js';
import type { RecordedCall, StoredMessage } from './fake-discord.js';
import { ALICE, BOB, CHANNEL, OPS_ROLE, buttonPress, eventually, startDiscordTwokey, type DiscordTwokey } from './helpers.js';

const MINUTE = 60_000;
const ESCALATION_CHANNEL = '1200000000000000031';

const CONFIG = configYaml([
  refundOperation({
    expiresIn: '2h',
    approvers: [`discord:user:${ALICE}`, `discord:user:${BOB}`],
    discord: CHANNEL,
    remind: ['10m', '30m'],
    escalate: { after: '1h', approvers: [`discord:role:${OPS_ROLE}`], discord: ESCALATION_CHANNEL },
    commit: 'on_approve',
  }),
  `  - name: ping
    description: Reminded, escalated in the same channel
    params: { type: object, properties: { n: { type: integer } } }
    summary: "{{agent}} pings."
    expiresIn: 2h
    approval:
      approvers: [discord:user:${ALICE}]
      discord: { channel: "${CHANNEL}" }
      escalate: { after: 20m, approvers: [discord:user:${BOB}] }
    commit: on_approve
    executor: { type: echo }
`,
]);

describe.each(drivers)('Discord reminders and escalation (%s)', (driver) => {
  const clock = manualClock();
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, clock, configYaml: CONFIG, outboxPollMs: 20 });
  });
  afterAll(() => t.close());

  /** The proposal's message, as first posted. */
  const postOf = (id: string): RecordedCall | undefined => t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).find((call) => call.body.nonce === id);
  /**
   * Messages in the channel mentioning the proposal, other than its own. Messages, not calls: the
   * manual clock can outrun an outbox lease and a post be sent twice, which its nonce makes one message.
   */
  const followUpsOf = (id: string, channel = CHANNEL): StoredMessage[] =>
    [...t.fake.messages.values()].filter((m) => m.channelId === channel && typeof m.body.content === 'string' && m.body.content.includes(id));
  const statusOf = (id: string): string => {
    const stored = [...t.fake.messages.values()].find((m) => m.body.nonce === id);
    return stored?.body.embeds[0].fields.find((f: { name: string }) => f.name === 'Status')?.value ?? '';
  };

  async function propose(operation: string, params: Record<string, unknown>): Promise<{ id: string; messageId: string }> {
    const { id } = await t.propose(operation, params);
    await eventually(() => expect(postOf(id)).toBeDefined());
    const messageId = [...t.fake.messages.values()].find((m) => m.body.nonce === id)?.id ?? '';
    return { id, messageId };
  }

  it('re-pings the approvers at 10 and 30 minutes as replies, escalates at 1 h in its channel, then expires', async () => {
    const { id, messageId } = await propose('refund', { amount_cents: 5000 });

    clock.advance(10 * MINUTE - 1);
    await t.twokey.outbox.runOnce();
    expect(followUpsOf(id)).toHaveLength(0);
    clock.advance(1);
    await eventually(() => expect(followUpsOf(id)).toHaveLength(1));
    const [reminder] = followUpsOf(id);
    expect(reminder?.body).toMatchObject({
      content: expect.stringMatching(
        new RegExp(`^🔔 Reminder <@${ALICE}> <@${BOB}>: \\*\\*refund\\*\\* \\(\`${id}\`\\) by argus still waits for 1 approval; it expires <t:\\d+:R>`),
      ),
      // Pings exactly the approvers; the reply itself pings nobody.
      allowed_mentions: { parse: [], users: [ALICE, BOB], roles: [], replied_user: false },
      message_reference: { message_id: messageId, channel_id: CHANNEL, fail_if_not_exists: false },
      enforce_nonce: true,
    });
    // The message itself says so.
    await eventually(() => expect(statusOf(id)).toMatch(/Pending.*reminded 1×/));

    clock.advance(20 * MINUTE);
    await eventually(() => expect(followUpsOf(id)).toHaveLength(2));
    expect(followUpsOf(id)[1]?.body.nonce).not.toBe(reminder?.body.nonce);

    clock.advance(30 * MINUTE);
    await eventually(() => expect(followUpsOf(id, ESCALATION_CHANNEL)).toHaveLength(1));
    const [escalation] = followUpsOf(id, ESCALATION_CHANNEL);
    expect(escalation?.body).toMatchObject({
      content: expect.stringMatching(new RegExp(`^🚨 Escalated to <@&${OPS_ROLE}>, who may now decide: \\*\\*refund\\*\\*`)),
      allowed_mentions: { parse: [], users: [], roles: [OPS_ROLE] },
    });
    // A message of its own in that channel: a reply cannot point to another channel.
    expect(escalation?.body.message_reference).toBeUndefined();
    expect(followUpsOf(id)).toHaveLength(2);
    await eventually(() => expect(statusOf(id)).toMatch(/reminded 2×; escalated <t:\d+:R>/));
    expect(await t.twokey.services.proposals.get(id)).toMatchObject({
      status: 'pending',
      reminders: 2,
      approvers: [`discord:user:${ALICE}`, `discord:user:${BOB}`, `discord:role:${OPS_ROLE}`],
    });

    clock.advance(60 * MINUTE);
    expect(await t.twokey.services.proposals.expireDue()).toBeGreaterThanOrEqual(1);
    await t.twokey.outbox.runOnce();
    await eventually(() => expect(statusOf(id)).toMatch(/Expired/));
    expect(followUpsOf(id)).toHaveLength(2);
    expect(followUpsOf(id, ESCALATION_CHANNEL)).toHaveLength(1);
  });

  it('after escalation a holder of the added role may approve from Discord; before it, not', async () => {
    const { id } = await propose('refund', { amount_cents: 10 });
    const ops = { userId: '1200000000000000041', roles: [OPS_ROLE] };
    const early = await t.interact(buttonPress(`twokey:approve:${id}`, ops));
    expect(early.body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/not on the approvers list/) } });
    clock.advance(60 * MINUTE);
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).escalatedAt).not.toBeNull());
    expect((await t.interact(buttonPress(`twokey:approve:${id}`, ops))).body).toEqual({ type: 6 });
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('committed'));
  });

  it('an escalation without a channel of its own is a reply too; a decided proposal gets nothing more', async () => {
    const { id, messageId } = await propose('ping', { n: 1 });
    clock.advance(20 * MINUTE);
    await eventually(() => expect(followUpsOf(id)).toHaveLength(1));
    expect(followUpsOf(id)[0]?.body).toMatchObject({
      content: expect.stringMatching(new RegExp(`^🚨 Escalated to <@${BOB}>`)),
      allowed_mentions: { users: [BOB], roles: [], replied_user: false },
      message_reference: { message_id: messageId, channel_id: CHANNEL },
    });
    // The outbox retrying the same escalation (its answer lost) posts no second message.
    const proposal = await t.twokey.services.proposals.get(id);
    const view = await t.twokey.chatSync.buildView(proposal, await t.twokey.services.store.getAgent(proposal.agentId));
    await t.discord.publisher.postFollowUp?.({ channel: CHANNEL, messageId }, view, { kind: 'escalate', mention: [`discord:user:${BOB}`], channel: null });
    expect(followUpsOf(id)).toHaveLength(1);

    const decided = await propose('refund', { amount_cents: 20 });
    await t.twokey.services.proposals.approve(decided.id, { identity: `discord:user:${ALICE}`, via: 'test' });
    clock.advance(2 * 60 * MINUTE);
    await t.twokey.outbox.runOnce();
    await t.twokey.outbox.runOnce();
    expect(followUpsOf(decided.id)).toHaveLength(0);
    expect(followUpsOf(decided.id, ESCALATION_CHANNEL)).toHaveLength(0);
  });
});
