import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { ALICE, CAROL, CHANNEL, OPS_ROLE, buttonPress, eventually, startDiscordTwokey, type DiscordTwokey } from './helpers.js';

// Alice and Carol are both named approvers; only Carol holds the role the rule names.
const CONFIG = configYaml([
  refundOperation({
    approvers: [`discord:user:${ALICE}`, `discord:user:${CAROL}`],
    discord: CHANNEL,
    commit: 'on_approve',
    approverRule: {
      when: `params.amount_cents <= 100000 || "discord:role:${OPS_ROLE}" in approver.groups`,
      reason: 'refunds over $1,000 need someone with the ops role',
    },
  }),
]);

describe.each(drivers)('approver rules at a Discord click (%s)', (driver) => {
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, configYaml: CONFIG });
  });
  afterAll(() => t?.close());

  /** What the clicker was told privately: the answer itself, or a follow-up when the checks took longer. */
  const toldPrivately = (answer: { body: unknown }, proposalId: string): string[] => {
    const body = (answer.body ?? {}) as { type?: number; data?: { content?: string; flags?: number } };
    const inAnswer = body.type === 4 && body.data?.flags === 64 ? [String(body.data.content)] : [];
    const followUps = t.fake
      .callsTo('POST', /^\/webhooks\//)
      .filter((call) => call.body.flags === 64 && String(call.body.content).includes(proposalId))
      .map((call) => String(call.body.content));
    return [...inAnswer, ...followUps];
  };

  it('a named approver without the role is told the rule’s reason and changes nothing; one with it approves', async () => {
    const proposal = await t.propose('refund', { amount_cents: 250_000 });
    const refused = await t.interact(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    expect(refused.status).toBe(200);
    const told = await eventually(() => {
      const messages = toldPrivately(refused, proposal.id);
      expect(messages.some((text) => text.includes('refunds over $1,000 need someone with the ops role'))).toBe(true);
      return messages;
    });
    expect(told.join('\n')).toContain('Nothing was changed');
    expect(await t.twokey.services.store.listApprovals(proposal.id)).toEqual([]);
    expect((await t.twokey.services.store.getProposal(proposal.id))?.status).toBe('pending');

    const approved = await t.interact(buttonPress(`twokey:approve:${proposal.id}`, { userId: CAROL, roles: [OPS_ROLE] }));
    expect(approved.status).toBe(200);
    await eventually(async () => expect((await t.twokey.services.store.getProposal(proposal.id))?.status).toBe('committed'));
    const [approval] = await t.twokey.services.store.listApprovals(proposal.id);
    expect(approval).toMatchObject({ approver: `discord:user:${CAROL}` });
  });
});
