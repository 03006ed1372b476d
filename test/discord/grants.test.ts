import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { configYaml, deleteWorkspaceOperation, refundOperation } from '../support/operations.js';
import type { StoredMessage } from './fake-discord.js';
import {
  ALICE,
  CHANNEL,
  MALLORY,
  OPS_ROLE,
  OWNER,
  CAROL,
  buttonPress,
  eventually,
  grantFormSubmit,
  startDiscordTwokey,
  type DiscordTwokey,
} from './helpers.js';

const HOUR = 3_600_000;

const CONFIG = configYaml([
  refundOperation({
    customer: true,
    expiresIn: '1h',
    approvers: [`discord:user:${ALICE}`, `discord:role:${OPS_ROLE}`, `discord:user:${OWNER}`],
    discord: CHANNEL,
    grants: { maxDuration: '8h', durations: ['15m', '1h', '8h'] },
    commit: 'on_approve',
  }),
  deleteWorkspaceOperation({ approvers: [`discord:user:${ALICE}`], discord: CHANNEL, commit: 'on_approve' }),
]);

const messageOf = (t: DiscordTwokey, proposalId: string): StoredMessage | undefined => [...t.fake.messages.values()].find((m) => m.body.nonce === proposalId);

const buttonsOf = (message: StoredMessage | undefined): Array<{ label: string; custom_id: string }> =>
  (message?.body.components ?? []).flatMap((row: { components: Array<{ label: string; custom_id: string }> }) => row.components);

describe.each(drivers)('"Approve for…" from Discord (%s)', (driver) => {
  const clock = manualClock();
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, clock, configYaml: CONFIG });
  });
  afterAll(() => t.close());

  async function proposeAndWait(operation: string, params: Record<string, unknown>) {
    const { id } = await t.propose(operation, params);
    await eventually(() => expect(messageOf(t, id)).toBeDefined());
    return id;
  }
  const refund = (customer: string, amount: number) => t.propose('refund', { customer, amount_cents: amount });
  const grantsOf = async (proposalId: string) => (await t.twokey.services.grants.list({})).filter((entry) => entry.grant.sourceProposalId === proposalId);
  const approvalsOf = (proposalId: string) => t.twokey.services.store.listApprovals(proposalId);

  it('offers the button only where the operation allows grants', async () => {
    const refundId = await proposeAndWait('refund', { customer: 'c0', amount_cents: 1 });
    expect(buttonsOf(messageOf(t, refundId))).toEqual([
      expect.objectContaining({ label: 'Approve', custom_id: `twokey:approve:${refundId}` }),
      expect.objectContaining({ label: 'Approve for 15 min…', custom_id: `twokey:grant:${refundId}` }),
      expect.objectContaining({ label: 'Reject', custom_id: `twokey:reject:${refundId}` }),
    ]);
    const deleteId = await proposeAndWait('delete_workspace', { workspace: 'w' });
    expect(buttonsOf(messageOf(t, deleteId)).map((b) => b.custom_id)).toEqual([`twokey:approve:${deleteId}`, `twokey:reject:${deleteId}`]);
    // A forged grant press on that operation is refused privately.
    const forged = await t.interact(buttonPress(`twokey:grant:${deleteId}`, { userId: ALICE }));
    expect(forged.body).toMatchObject({
      type: 4,
      data: { flags: 64, content: expect.stringMatching(/does not allow approving for a while.*Nothing was changed/) },
    });
    const forgedForm = await t.interact(grantFormSubmit(`twokey:grant:${deleteId}`, { userId: ALICE }, { duration: [String(HOUR)] }));
    expect(forgedForm.body).toMatchObject({ type: 4, data: { flags: 64 } });
    await t.discord.settle();
    expect(await t.twokey.services.proposals.get(deleteId)).toMatchObject({ status: 'pending' });
    expect(await approvalsOf(deleteId)).toEqual([]);
  });

  it('an approver grants for 1 h, 2 uses, bounded: the proposal commits and the next ones within bounds are decided by the grant', async () => {
    const id = await proposeAndWait('refund', { customer: 'c1', amount_cents: 500 });
    const opened = await t.interact(buttonPress(`twokey:grant:${id}`, { userId: ALICE }));
    expect(opened.body).toMatchObject({ type: 9, data: { custom_id: `twokey:grant:${id}`, title: 'Approve refund for a while' } });
    const form = JSON.stringify(opened.body.data.components);
    expect(opened.body.data.components.map((c: { component: { custom_id: string } }) => c.component.custom_id)).toEqual(['duration', 'uses', 'bounds']);
    for (const [label, value] of [
      ['15 min', 900_000],
      ['1 h', HOUR],
      ['8 h', 8 * HOUR],
    ] as const) {
      expect(form).toContain(`"label":"${label}","value":"${value}"`);
    }

    const submitted = await t.interact(
      grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, { duration: [String(HOUR)], uses: ' 2 ', bounds: ['bounded'] }),
    );
    expect(submitted.body).toEqual({ type: 6 });
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('committed'));
    await t.discord.settle();
    const [entry] = await grantsOf(id);
    expect(entry?.grant).toMatchObject({
      operation: 'refund',
      maxUses: 2,
      uses: 0,
      durationMs: HOUR,
      createdBy: `discord:user:${ALICE}`,
      expiresAt: new Date(clock().getTime() + HOUR),
    });
    // The database may keep params in another key order.
    expect([...(entry?.grant.bounds ?? [])].sort((a, b) => a.param.localeCompare(b.param))).toEqual([
      { param: 'amount_cents', op: 'lte', value: 500 },
      { param: 'customer', op: 'eq', value: 'c1' },
    ]);
    expect(entry?.grant.activatedAt).not.toBeNull();
    expect(entry?.approvals).toEqual([expect.objectContaining({ approver: `discord:user:${ALICE}`, via: 'discord' })]);
    const grantId = entry?.grant.id ?? '';

    // Outside the bounds: a bigger amount, another customer. Both wait for a human.
    expect((await t.twokey.request('GET', `/v1/proposals/${(await refund('c1', 501)).id}`, { apiKey: t.apiKey })).body.status).toBe('pending');
    expect((await t.twokey.request('GET', `/v1/proposals/${(await refund('c2', 100)).id}`, { apiKey: t.apiKey })).body.status).toBe('pending');

    const covered = await t.twokey.request('POST', '/v1/proposals', {
      apiKey: t.apiKey,
      body: { operation: 'refund', params: { customer: 'c1', amount_cents: 400 } },
    });
    expect(covered.body).toMatchObject({ status: 'committed', outcome: { decidedBy: [`grant:${grantId}`] } });
    // In the channel: one compact line naming the grant, without buttons.
    await eventually(() => expect(messageOf(t, covered.body.id)).toBeDefined());
    const compact = messageOf(t, covered.body.id);
    expect(compact?.body.components).toEqual([]);
    expect(compact?.body.embeds[0].description).toContain(`auto-approved by grant \`${grantId}\``);
    expect(compact?.body.embeds[0].fields).toBeUndefined();

    const second = await refund('c1', 500);
    expect((await t.twokey.services.proposals.get(second.id)).decidedBy).toBe(`grant:${grantId}`);
    // Two uses spent: the third waits for a human.
    const third = await refund('c1', 1);
    expect((await t.twokey.services.proposals.get(third.id)).status).toBe('pending');
    expect((await t.twokey.services.grants.get(grantId))?.grant.uses).toBe(2);
  });

  it('a grant without limits covers other params too, by a role holder', async () => {
    const id = await proposeAndWait('refund', { customer: 'c3', amount_cents: 10 });
    const submitted = await t.interact(grantFormSubmit(`twokey:grant:${id}`, { userId: CAROL, roles: [OPS_ROLE] }, { duration: ['900000'], bounds: ['any'] }));
    expect(submitted.body).toEqual({ type: 6 });
    await eventually(async () => expect(await grantsOf(id)).toHaveLength(1));
    const [entry] = await grantsOf(id);
    expect(entry?.grant).toMatchObject({ maxUses: null, bounds: [], durationMs: 900_000 });
    expect(entry?.approvals).toEqual([expect.objectContaining({ approver: `discord:user:${CAROL}`, matchedRule: `discord:role:${OPS_ROLE}` })]);
    const other = await refund('c9', 99_999);
    expect((await t.twokey.services.proposals.get(other.id)).decidedBy).toBe(`grant:${entry?.grant.id}`);
    await t.twokey.services.grants.revoke(entry?.grant.id ?? '', `discord:user:${CAROL}`);
  });

  it('a non-approver and the owner are refused privately, by the button and by the form, and nothing changes', async () => {
    const id = await proposeAndWait('refund', { customer: 'c4', amount_cents: 10 });
    const stranger = await t.interact(buttonPress(`twokey:grant:${id}`, { userId: MALLORY }));
    expect(stranger.body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/not on the approvers list/) } });
    const owner = await t.interact(buttonPress(`twokey:grant:${id}`, { userId: OWNER }));
    expect(owner.body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/You own the agent "argus"/) } });
    // The form sent without the button (or after losing a role) gets the same checks.
    for (const userId of [MALLORY, OWNER]) {
      const form = await t.interact(grantFormSubmit(`twokey:grant:${id}`, { userId }, { duration: [String(HOUR)] }));
      expect(form.body).toMatchObject({ type: 4, data: { flags: 64, content: expect.stringMatching(/Nothing was changed/) } });
    }
    await t.discord.settle();
    expect(await t.twokey.services.proposals.get(id)).toMatchObject({ status: 'pending' });
    expect(await approvalsOf(id)).toEqual([]);
    expect(await grantsOf(id)).toEqual([]);
  });

  it('a malformed component or grant form is a 400 naming the problem; uses that are not a number are refused privately', async () => {
    const id = await proposeAndWait('refund', { customer: 'c5', amount_cents: 10 });
    const noCustomId = buttonPress(`twokey:grant:${id}`, { userId: ALICE });
    const withoutCustomId = await t.interact({ ...noCustomId, data: { component_type: 2 } });
    expect(withoutCustomId).toMatchObject({ status: 400, body: { error: { code: 'invalid_request', message: expect.stringMatching(/custom_id/) } } });

    const malformed = [
      grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, {}),
      grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, { duration: String(HOUR) }),
      grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, { duration: ['one hour'] }),
      grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, { duration: [String(HOUR)], bounds: ['everything'] }),
    ];
    for (const payload of malformed) {
      const response = await t.interact(payload);
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/duration|bounds/) });
    }
    for (const uses of ['abc', '0', '10001', '1.5']) {
      const response = await t.interact(grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, { duration: [String(HOUR)], uses }));
      expect(response.body).toMatchObject({
        type: 4,
        data: { flags: 64, content: expect.stringMatching(/whole number from 1 to 10000.*Nothing was changed/) },
      });
    }
    // Longer than the operation's maxDuration: the core refuses it, and says so privately.
    const tooLong = await t.interact(grantFormSubmit(`twokey:grant:${id}`, { userId: ALICE }, { duration: [String(9 * HOUR)] }));
    expect(tooLong.body).toEqual({ type: 6 });
    await eventually(() =>
      expect(t.fake.callsTo('POST', /^\/webhooks\//).at(-1)?.body).toMatchObject({ flags: 64, content: expect.stringMatching(/at most 480 minutes/) }),
    );
    await t.discord.settle();
    expect(await t.twokey.services.proposals.get(id)).toMatchObject({ status: 'pending' });
    expect(await approvalsOf(id)).toEqual([]);
    expect(await grantsOf(id)).toEqual([]);
  });
});
