import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { ALICE, CHANNEL, eventually, startDiscordTwokey, type DiscordTwokey } from '../discord/helpers.js';

const HOUR = 3_600_000;

const countConfig = configYaml([
  refundOperation({
    expiresIn: '1h',
    policy: [{ when: "count_last('1h') < 3", decide: 'approve', reason: 'the first three refunds an hour are automatic' }],
    approvers: ['web:alice'],
    commit: 'on_approve',
  }),
]);

describe.each(drivers)('count_last in a policy rule (%s)', (driver) => {
  const clock = manualClock();
  let twokey: TestTwokey;
  let argus: string;
  let hermes: string;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, clock, configYaml: countConfig });
    ({ apiKey: argus } = await twokey.createAgent('argus'));
    ({ apiKey: hermes } = await twokey.createAgent('hermes'));
  });
  afterAll(() => twokey.close());

  const propose = async (apiKey: string) => {
    const answer = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { amount_cents: 100 } } });
    expect(answer.status).toBe(201);
    return answer.body as { id: string; status: string; outcome: { decidedBy: string[] } };
  };
  const statuses = async (apiKey: string, n: number) => {
    const seen: string[] = [];
    for (let i = 0; i < n; i += 1) seen.push((await propose(apiKey)).status);
    return seen;
  };

  it('approves the first three of an hour, then asks a human until the window moves past them', async () => {
    const first = await propose(argus);
    expect(first).toMatchObject({ status: 'committed', outcome: { decidedBy: ['policy:refund#0'] } });
    expect(await statuses(argus, 3)).toEqual(['committed', 'committed', 'pending']);
    // Per agent: another agent's window is empty.
    expect(await statuses(hermes, 1)).toEqual(['committed']);

    // One millisecond short of an hour, the four proposals of the first instant still count.
    clock.advance(HOUR - 1);
    expect(await statuses(argus, 1)).toEqual(['pending']);
    // At the hour they leave the window; only the one made a millisecond ago counts.
    clock.advance(1);
    expect(await statuses(argus, 3)).toEqual(['committed', 'committed', 'pending']);

    const waiting = await propose(argus);
    expect(waiting.status).toBe('pending');
    const audit = (await twokey.services.store.listAudit({ proposalId: waiting.id })).map((e) => e.type);
    expect(audit).toEqual(['proposal.created']);
  });
});

const chatConfig = `
operations:
  - name: loud_refund
    description: Refund, shown in chat when a rule decides
    params: { type: object, required: [amount_cents], properties: { amount_cents: { type: integer } } }
    summary: "{{agent}} refunds {{params.amount_cents}} cents."
    policy:
      - { when: "params.amount_cents <= 2000", decide: approve, reason: small refunds are automatic }
    automaticDecisions: message
    approval:
      approvers: [discord:user:${ALICE}]
      discord: { channel: "${CHANNEL}" }
    commit: on_approve
    executor: { type: echo }
  - name: quiet_refund
    description: Refund, not shown in chat when a rule decides
    params: { type: object, required: [amount_cents], properties: { amount_cents: { type: integer } } }
    summary: "{{agent}} refunds {{params.amount_cents}} cents."
    policy:
      - { when: "params.amount_cents == 666", decide: deny, reason: not this amount }
      - { when: "params.amount_cents <= 2000", decide: approve, reason: small refunds are automatic }
    automaticDecisions: silent
    approval:
      approvers: [discord:user:${ALICE}]
      discord: { channel: "${CHANNEL}" }
    commit: on_approve
    executor: { type: echo }
`;

describe.each(drivers)('automaticDecisions in chat (%s)', (driver) => {
  let t: DiscordTwokey;

  beforeAll(async () => {
    t = await startDiscordTwokey({ driver, configYaml: chatConfig });
  });
  afterAll(() => t.close());

  const postsOf = (id: string) => t.fake.callsTo('POST', /^\/channels\/\d+\/messages$/).filter((call) => call.body.nonce === id);
  async function chatJobsOf(id: string): Promise<number> {
    const result = await t.twokey.services.database.db.execute(
      sql`select count(*)::int as n from jobs where kind like 'chat.%' and payload->>'proposalId' = ${id}`,
    );
    const rows = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Array<{ n: number }>;
    return rows[0]?.n ?? -1;
  }

  it('message: a rule’s approval is one compact line without buttons', async () => {
    const { id } = await t.propose('loud_refund', { amount_cents: 1500 });
    await eventually(() => expect(postsOf(id)).toHaveLength(1));
    const [post] = postsOf(id);
    expect(post?.body.components).toEqual([]);
    expect(post?.body.embeds).toHaveLength(1);
    const description: string = post?.body.embeds[0].description;
    expect(description.split('\n')[0]).toBe(`✅ \`${id}\` auto-approved by rule \`policy:loud_refund#0\` (small refunds are automatic) for argus.`);
    // Then the outcome as it changes, and the summary.
    expect(description).toContain('argus refunds 1500 cents.');
    expect(post?.body.embeds[0].fields).toBeUndefined();
  });

  it('silent: neither an approval nor a denial by a rule posts anything; a proposal left to humans still does', async () => {
    const approved = await t.propose('quiet_refund', { amount_cents: 1500 });
    const denied = await t.propose('quiet_refund', { amount_cents: 666 });
    const human = await t.propose('quiet_refund', { amount_cents: 5000 });
    expect((await t.twokey.services.proposals.get(approved.id)).status).toBe('committed');
    expect((await t.twokey.services.proposals.get(denied.id)).status).toBe('rejected');
    // Jobs are queued in the proposal's own transaction: none exists, so no message can ever follow.
    expect(await chatJobsOf(approved.id)).toBe(0);
    expect(await chatJobsOf(denied.id)).toBe(0);
    expect(await chatJobsOf(human.id)).toBe(1);
    await eventually(() => expect(postsOf(human.id)).toHaveLength(1));
    expect(postsOf(human.id)[0]?.body.components[0].components.map((c: { label: string }) => c.label)).toEqual(['Approve', 'Reject']);
    await t.twokey.outbox.runOnce();
    expect(postsOf(approved.id)).toHaveLength(0);
    expect(postsOf(denied.id)).toHaveLength(0);
  });
});
