/**
 * The README's "Policies, grants, reminders" config, run as written: the YAML block is read from the
 * README itself (so it cannot drift), and each behaviour its comments promise is checked against a
 * real twokey and the fake Slack, with an injected clock: small refunds pass, big ones need two
 * people, an approver grants "1 h" from Slack, and a forgotten request is re-pinged, escalated,
 * then expires without consent.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import type { FakeSlack } from '../slack/support/fake-slack.js';
import { grantSubmission, interactionBody, type SlackPoster } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const WAIT = { timeout: 20_000, interval: 50 };

function readmePolicyConfig(): string {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = readme.split(/^## /m).find((part) => part.startsWith('Policies, grants, reminders'));
  const yaml = section?.match(/```yaml\n([\s\S]*?)```/)?.[1];
  if (!yaml) throw new Error('README has no yaml block under "## Policies, grants, reminders"');
  return yaml;
}

describe.each(drivers)("the README's policies config (%s)", (driver) => {
  const clock = manualClock();
  let fake: FakeSlack;
  let twokey: SlackTwokey;
  let apiKey: string;
  let post: SlackPoster;

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, clock, configYaml: readmePolicyConfig(), outboxPollMs: 20 });
    ({ fake, apiKey, post } = twokey);
  });
  afterAll(() => twokey?.close());

  const refund = async (customer: string, amount: number) =>
    (await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'refund', params: { customer, amount_cents: amount } } })).body;
  const postsOf = (id: string) => fake.callsTo('chat.postMessage').filter((c) => !c.args.thread_ts && JSON.stringify(c.args.blocks ?? []).includes(id));
  const threadTexts = (id: string) =>
    fake
      .callsTo('chat.postMessage')
      .filter((c) => Boolean(c.args.thread_ts) && String(c.args.text).includes(id))
      .map((c) => String(c.args.text));

  it('a small refund passes by rule policy:refund#0 (≤ 2000 at the boundary), one cent more waits for a human', async () => {
    expect(await refund('c1', 2000)).toMatchObject({
      status: 'committed',
      outcome: { outcome: 'committed', userConsent: true, decidedBy: ['policy:refund#0'] },
    });
    expect(await refund('c1', 2001)).toMatchObject({ status: 'pending', outcome: { decidedBy: [] } });
  });

  it('a big refund needs two people: one approval leaves it pending, the second commits it', async () => {
    const big = await refund('c2', 150_000);
    expect(big).toMatchObject({ status: 'pending' });
    await twokey.services.proposals.approve(big.id, { identity: 'slack:U0ALICE', via: 'test' });
    expect(await twokey.services.proposals.get(big.id)).toMatchObject({ status: 'pending', quorum: 2 });
    await twokey.services.proposals.approve(big.id, { identity: 'slack:U0BOB', via: 'test' });
    expect(await twokey.services.proposals.get(big.id)).toMatchObject({ status: 'committed' });
  });

  it('an approver grants "1 h" from Slack: the next refund is approved by the grant, and not once the hour is over', async () => {
    const first = await refund('c3', 5_000);
    await vi.waitFor(() => expect(postsOf(first.id)).toHaveLength(1), WAIT);
    expect(JSON.stringify(postsOf(first.id)[0]?.args.blocks)).toContain('"action_id":"twokey_grant"');
    expect((await post(interactionBody(grantSubmission(first.id, 'U0ALICE', HOUR, null)))).status).toBe(200);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(first.id)).status).toBe('committed'), WAIT);
    // The submission is stored, then decided: the approval first, the grant right after it.
    const [entry] = await vi.waitFor(async () => {
      const made = (await twokey.services.grants.list({})).filter((e) => e.grant.sourceProposalId === first.id);
      expect(made).toHaveLength(1);
      return made;
    }, WAIT);
    expect(entry?.grant).toMatchObject({ durationMs: HOUR });

    expect(await refund('c3', 6_000)).toMatchObject({ status: 'committed', outcome: { decidedBy: [`grant:${entry?.grant.id}`] } });
    clock.advance(HOUR);
    expect(await refund('c3', 6_000)).toMatchObject({ status: 'pending' });
  });

  it('a forgotten refund is re-pinged at 10 and 30 min, escalated to finance at 1 h, and expires at 2 h without consent', async () => {
    const forgotten = await refund('c4', 9_000);
    await vi.waitFor(() => expect(postsOf(forgotten.id)).toHaveLength(1), WAIT);
    clock.advance(10 * MINUTE);
    await vi.waitFor(() => expect(threadTexts(forgotten.id).filter((t) => t.includes('Reminder'))).toHaveLength(1), WAIT);
    clock.advance(20 * MINUTE);
    await vi.waitFor(() => expect(threadTexts(forgotten.id).filter((t) => t.includes('Reminder'))).toHaveLength(2), WAIT);
    clock.advance(30 * MINUTE);
    await vi.waitFor(async () => expect((await twokey.services.proposals.get(forgotten.id)).escalatedAt).not.toBeNull(), WAIT);
    expect(await twokey.services.proposals.get(forgotten.id)).toMatchObject({
      status: 'pending',
      approvers: ['slack:U0ALICE', 'slack:U0BOB', 'slack:U0CAROL', 'slack:group:S0FINANCE'],
    });
    await vi.waitFor(() => expect(fake.callsTo('chat.postMessage').some((c) => String(c.args.text).includes('S0FINANCE'))).toBe(true), WAIT);

    clock.advance(HOUR);
    await twokey.services.proposals.expireDue();
    const view = await twokey.request('GET', `/v1/proposals/${forgotten.id}`, { apiKey });
    expect(view.body).toMatchObject({ status: 'expired', outcome: { outcome: 'expired', userConsent: false, retryable: false } });
  });
});
