import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { ALICE, BOB, CONVERSATION, eventually, startTeamsTwokey, type TeamsTwokey } from './helpers.js';

const MINUTE = 60_000;
const ESCALATION = '19:0f0e0d0c0b0a09080706050403020100@thread.tacv2';

const CONFIG = `
operations:
  - name: refund
    description: Refund a customer
    params: { type: object, required: [amount_cents], properties: { amount_cents: { type: integer } } }
    summary: "{{agent}} wants to refund {{params.amount_cents}} cents."
    expiresIn: 2h
    approval:
      approvers: [teams:${ALICE}]
      teams: { conversation: "${CONVERSATION}" }
      remind: [10m]
      escalate: { after: 1h, approvers: [teams:${BOB}], teams: { conversation: "${ESCALATION}" } }
    commit: on_approve
    executor: { type: echo }
`;

describe.each(drivers)('Teams reminders and escalation (%s)', (driver) => {
  const clock = manualClock();
  let t: TeamsTwokey;

  beforeAll(async () => {
    t = await startTeamsTwokey({ driver, clock, configYaml: CONFIG, outboxPollMs: 20 });
  });
  afterAll(() => t?.close());

  const followUps = (conversation: string, id: string) =>
    t.fake.calls.filter(
      (call) =>
        call.method === 'POST' &&
        call.path.startsWith(`/v3/conversations/${conversation}/`) &&
        JSON.stringify(call.body).includes(id) &&
        call.body.attachments[0].content.actions === undefined,
    );

  it('reminds with a reply under the card at 10 minutes, and escalates at 1 h in the escalation conversation', async () => {
    const { id } = await t.propose('refund', { amount_cents: 5000 });
    const card = await t.cardOf(id);

    clock.advance(10 * MINUTE);
    const [reminder] = await eventually(() => {
      const found = followUps(CONVERSATION, id);
      expect(found).toHaveLength(1);
      return found;
    });
    expect(reminder?.path).toBe(`/v3/conversations/${CONVERSATION}/activities/${card.id}`);
    expect(reminder?.body.replyToId).toBe(card.id);
    const text = JSON.stringify(reminder?.body.attachments[0].content);
    expect(text).toContain('Reminder ');
    expect(text).toContain(`teams:${ALICE}`);
    expect(text).toContain('still waits for 1 approval');

    clock.advance(50 * MINUTE);
    const [escalation] = await eventually(() => {
      const found = followUps(ESCALATION, id);
      expect(found).toHaveLength(1);
      return found;
    });
    expect(escalation?.path).toBe(`/v3/conversations/${ESCALATION}/activities`);
    expect(JSON.stringify(escalation?.body.attachments[0].content)).toContain(`Escalated to `);
    expect(JSON.stringify(escalation?.body.attachments[0].content)).toContain(`teams:${BOB}`);
  });
});
