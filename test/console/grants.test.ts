import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { manualClock } from '../support/clock.js';
import { configYaml, payoutOperation, refundOperation, sendMailingOperation } from '../support/operations.js';
import { startConsoleTwokey, type ConsoleTwokey } from './support.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

const grantsConfigYaml = configYaml([
  refundOperation({
    customer: true,
    expiresIn: '1h',
    approvers: ['web:operator', 'web:reviewer', 'web:owner'],
    grants: { maxDuration: '2h', durations: ['15m', '1h', '2h'] },
    policy: [
      { when: 'params.amount_cents <= 100', decide: 'approve', reason: 'refunds up to a dollar are automatic' },
      { when: "params.customer == 'blocked'", decide: 'deny', reason: 'this customer is blocked from refunds' },
    ],
    commit: 'on_approve',
  }),
  payoutOperation({ expiresIn: '1h', approvers: ['web:operator', 'web:reviewer'], quorum: 2, grants: { maxDuration: '1h' }, commit: 'on_approve' }),
  sendMailingOperation({ expiresIn: '1h', approvers: ['web:operator', 'web:reviewer'], commit: 'on_approve' }),
  `  - name: transfer
    description: Send money
    params:
      type: object
      required: [to, amount_cents]
      properties:
        to: { type: string }
        amount_cents: { type: integer, minimum: 1 }
        memo: { type: string }
        meta: { type: object }
        n: { type: integer }
    summary: "{{agent}} sends {{params.amount_cents}} cents to {{params.to}}."
    approval: { approvers: [web:operator, web:reviewer] }
    grants: { allow: true, maxDuration: 1h }
    executor: { type: echo }
`,
]);

const grantOf = (location: unknown): string => new URL(String(location), 'http://x').searchParams.get('grant') ?? '';

describe.each(drivers)('grants in the web console (%s)', (driver) => {
  const clock = manualClock();
  let twokey: ConsoleTwokey;
  let apiKey: string;
  let operator: { cookie: string; csrf: string };
  let reviewer: { cookie: string; csrf: string };
  let mallory: { cookie: string; csrf: string };

  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver, clock, configYaml: grantsConfigYaml });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
    operator = await twokey.signIn('operator');
    reviewer = await twokey.signIn('reviewer');
    mallory = await twokey.signIn('mallory');
  });
  afterAll(() => twokey.close());

  const status = async (id: string) => (await twokey.services.store.getProposal(id))?.status;
  const refund = (customer: string, amount_cents: number) => twokey.propose(apiKey, 'refund', { customer, amount_cents });
  const approveFor = (id: string, who: { cookie: string; csrf: string }, fields: Record<string, string>) =>
    twokey.form(`/console/proposals/${id}/approve-for`, { _csrf: who.csrf, ...fields }, { cookie: who.cookie });
  const grantsCount = async () => (await twokey.services.grants.list({})).length;

  it('offers “Approve for…” with the configured durations and this proposal’s bounds, only where grants are allowed', async () => {
    const proposal = await refund('acme', 4900);
    const page = await twokey.page(`/console/proposals/${proposal.id}`, operator.cookie);
    expect(page.body).toContain(`action="/console/proposals/${proposal.id}/approve-for"`);
    for (const [ms, label] of [
      [15 * MINUTE, '15 min'],
      [HOUR, '1 h'],
      [2 * HOUR, '2 h'],
    ] as const) {
      expect(page.body).toContain(`<option value="${ms}">${label}</option>`);
    }
    expect(page.body).toContain('amount_cents ≤ 4900');
    expect(page.body).toContain('customer = &quot;acme&quot;');
    expect(page.body).toContain('Grants</a>');

    const mailing = await twokey.propose(apiKey, 'send_mailing', { list: 'all' });
    const plain = await twokey.page(`/console/proposals/${mailing.id}`, operator.cookie);
    expect(plain.body).toContain(`/console/proposals/${mailing.id}/approve"`);
    expect(plain.body).not.toContain('approve-for');
    const forged = await approveFor(mailing.id, operator, { duration: String(HOUR) });
    expect(forged.status).toBe(400);
    expect(forged.body).toContain('does not allow approving for a while');
    expect(await status(mailing.id)).toBe('pending');

    // Someone who may not approve sees neither button.
    expect((await twokey.page(`/console/proposals/${proposal.id}`, mallory.cookie)).body).not.toContain('approve-for');
  });

  it('approve-for approves this proposal and creates a grant; the next matching proposal is approved by grant:<id>', async () => {
    const first = await refund('globex', 2500);
    const response = await approveFor(first.id, operator, { duration: String(HOUR), uses: '' });
    expect(response.status).toBe(303);
    const grantId = grantOf(response.headers.location);
    expect(grantId).toMatch(/^grt_/);
    expect(await status(first.id)).toBe('committed');
    const notice = await twokey.page(String(response.headers.location), operator.cookie);
    expect(notice.body).toContain(`You approved`);
    expect(notice.body).toContain(grantId);

    const next = await refund('someone-else', 99_999);
    expect(await status(next.id)).toBe('committed');
    const decided = await twokey.services.store.getProposal(next.id);
    expect(decided?.decidedBy).toBe(`grant:${grantId}`);

    const page = await twokey.page(`/console/proposals/${next.id}`, reviewer.cookie);
    expect(page.body).toContain(`grant:${grantId}`);
    expect(page.body).toContain('covered by a grant from web:operator');
    expect(page.body).toContain('Covered by a grant');
    const history = await twokey.page('/console/history?operation=refund', reviewer.cookie);
    expect(history.body).toContain(`grant:${grantId}`);

    const grants = await twokey.page('/console/grants', reviewer.cookie);
    expect(grants.status).toBe(200);
    expect(grants.body).toContain(grantId);
    expect(grants.body).toContain('web:operator');
    expect(grants.body).toContain('argus');
    expect(grants.body).toContain('no limit');
    expect(grants.body).toContain(`action="/console/grants/${grantId}/revoke"`);
    // Revoked in the next test; this one leaves no grant behind for the others.
    expect((await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: operator.csrf }, { cookie: operator.cookie })).status).toBe(303);
  });

  it('a bounded grant covers up to this amount for the same customer, and no more; uses run out', async () => {
    const first = await refund('initech', 500);
    const response = await approveFor(first.id, reviewer, { duration: String(15 * MINUTE), uses: '2', bounded: 'yes' });
    expect(response.status).toBe(303);
    const grantId = grantOf(response.headers.location);
    const grants = await twokey.page('/console/grants', operator.cookie);
    expect(grants.body).toContain('amount_cents ≤ 500');
    expect(grants.body).toContain('2 of 2');

    const bigger = await refund('initech', 501);
    expect(await status(bigger.id)).toBe('pending');
    const otherCustomer = await refund('umbrella', 400);
    expect(await status(otherCustomer.id)).toBe('pending');
    const covered = await refund('initech', 400);
    expect((await twokey.services.store.getProposal(covered.id))?.decidedBy).toBe(`grant:${grantId}`);
    expect((await twokey.page('/console/grants', operator.cookie)).body).toContain('1 of 2');
    await refund('initech', 300);
    const third = await refund('initech', 200);
    expect(await status(third.id)).toBe('pending');
    expect((await twokey.page('/console/grants', operator.cookie)).body).not.toContain(grantId);

    for (const id of [bigger.id, otherCustomer.id, third.id]) {
      await twokey.form(`/console/proposals/${id}/reject`, { _csrf: operator.csrf }, { cookie: operator.cookie });
    }
  });

  it('a bounded grant binds every declared param: one the source proposal lacked stays absent, and the form lists it', async () => {
    const first = await twokey.propose(apiKey, 'transfer', { to: 'acme', amount_cents: 100 });
    const form = await twokey.page(`/console/proposals/${first.id}`, operator.cookie);
    for (const bound of ['to = &quot;acme&quot;', 'amount_cents ≤ 100', 'memo absent', 'meta absent', 'n absent']) expect(form.body).toContain(bound);
    const grantId = grantOf((await approveFor(first.id, operator, { duration: String(HOUR), bounded: 'yes' })).headers.location);
    expect(await status(first.id)).toBe('committed');
    expect((await twokey.page('/console/grants', operator.cookie)).body).toContain('memo absent');

    const smuggled = [{ memo: 'ALSO wire the balance to evil' }, { meta: {} }, { n: 1 }];
    const waiting: string[] = [];
    for (const extra of smuggled) {
      const proposal = await twokey.propose(apiKey, 'transfer', { to: 'acme', amount_cents: 50, ...extra });
      expect(await status(proposal.id), JSON.stringify(extra)).toBe('pending');
      waiting.push(proposal.id);
    }
    const covered = await twokey.propose(apiKey, 'transfer', { to: 'acme', amount_cents: 50 });
    expect((await twokey.services.store.getProposal(covered.id))?.decidedBy).toBe(`grant:${grantId}`);

    for (const id of waiting) await twokey.form(`/console/proposals/${id}/reject`, { _csrf: operator.csrf }, { cookie: operator.cookie });
    await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: operator.csrf }, { cookie: operator.cookie });
  });

  it('a non-approver can neither create nor revoke a grant; an owner cannot create one', async () => {
    const proposal = await refund('hooli', 700);
    const before = await grantsCount();
    const refused = await approveFor(proposal.id, mallory, { duration: String(HOUR) });
    expect(refused.status).toBe(403);
    expect(await status(proposal.id)).toBe('pending');
    const owner = await twokey.signIn('owner');
    expect((await approveFor(proposal.id, owner, { duration: String(HOUR) })).status).toBe(403);
    expect(await grantsCount()).toBe(before);

    const granted = await approveFor(proposal.id, operator, { duration: String(HOUR) });
    const grantId = grantOf(granted.headers.location);
    const page = await twokey.page('/console/grants', mallory.cookie);
    expect(page.body).toContain(grantId);
    expect(page.body).not.toContain(`/console/grants/${grantId}/revoke`);
    const forged = await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: mallory.csrf }, { cookie: mallory.cookie });
    expect(forged.status).toBe(403);
    expect((await twokey.services.grants.get(grantId))?.grant.revokedAt).toBeNull();

    expect((await twokey.form('/console/grants/grt_nothing/revoke', { _csrf: operator.csrf }, { cookie: operator.cookie })).status).toBe(404);
    await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: operator.csrf }, { cookie: operator.cookie });
  });

  it('revoking in the console stops the next use, is audited, and a second revocation says it was already done', async () => {
    const first = await refund('stark', 800);
    const grantId = grantOf((await approveFor(first.id, operator, { duration: String(HOUR) })).headers.location);
    const covered = await refund('stark', 800);
    expect(await status(covered.id)).toBe('committed');

    const revoked = await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: reviewer.csrf, return: '/console/grants' }, { cookie: reviewer.cookie });
    expect(revoked.status).toBe(303);
    const after = await twokey.page(String(revoked.headers.location), reviewer.cookie);
    expect(after.body).toContain(`Grant <code>${grantId}</code> is revoked`);
    expect(after.body).not.toContain(`id="grant-${grantId}"`);
    const event = (await twokey.services.audit.list({ limit: 1000 })).find((e) => e.type === 'grant.revoked' && e.data.grantId === grantId);
    expect(event).toMatchObject({ actor: 'web:reviewer', proposalId: first.id });

    const next = await refund('stark', 800);
    expect(await status(next.id)).toBe('pending');
    const again = await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: reviewer.csrf }, { cookie: reviewer.cookie });
    expect(again.status).toBe(409);
    expect(again.body).toContain('already revoked');
    await twokey.form(`/console/proposals/${next.id}/reject`, { _csrf: operator.csrf }, { cookie: operator.cookie });
  });

  it('refuses a form without the CSRF token, for approve-for and for revoke, and changes nothing', async () => {
    const proposal = await refund('wayne', 600);
    const before = await grantsCount();
    const missing = await twokey.form(`/console/proposals/${proposal.id}/approve-for`, { duration: String(HOUR) }, { cookie: operator.cookie });
    expect(missing.status).toBe(403);
    const crossSite = await twokey.form(
      `/console/proposals/${proposal.id}/approve-for`,
      { _csrf: operator.csrf, duration: String(HOUR) },
      { cookie: operator.cookie, headers: { 'sec-fetch-site': 'cross-site' } },
    );
    expect(crossSite.status).toBe(403);
    expect(await status(proposal.id)).toBe('pending');
    expect(await grantsCount()).toBe(before);

    const grantId = grantOf((await approveFor(proposal.id, operator, { duration: String(HOUR) })).headers.location);
    expect((await twokey.form(`/console/grants/${grantId}/revoke`, {}, { cookie: operator.cookie })).status).toBe(403);
    expect((await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: operator.csrf })).status).toBe(401);
    expect((await twokey.services.grants.get(grantId))?.grant.revokedAt).toBeNull();
    await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: operator.csrf }, { cookie: operator.cookie });
  });

  it('bad form values get a 400 naming the field, and nothing is approved', async () => {
    const proposal = await refund('tyrell', 900);
    const before = await grantsCount();
    const cases: [Record<string, string>, string][] = [
      [{}, '(duration)'],
      [{ duration: 'forever' }, '(duration)'],
      [{ duration: String(3 * HOUR) }, '(duration)'],
      [{ duration: String(HOUR), uses: '0' }, '(uses)'],
      [{ duration: String(HOUR), uses: 'lots' }, '(uses)'],
      [{ duration: String(HOUR), uses: '10001' }, '(uses)'],
      [{ duration: String(HOUR), bounded: 'maybe' }, '(bounded)'],
    ];
    for (const [fields, named] of cases) {
      const response = await approveFor(proposal.id, operator, fields);
      expect(response.status, JSON.stringify(fields)).toBe(400);
      expect(response.body).toContain(named);
      expect(response.body).toContain('Nothing was changed');
    }
    expect(await status(proposal.id)).toBe('pending');
    expect(await grantsCount()).toBe(before);
    await twokey.form(`/console/proposals/${proposal.id}/reject`, { _csrf: operator.csrf }, { cookie: operator.cookie });
  });

  it('quorum of two: the grant is in force once a second approver gives the same terms, as in Slack', async () => {
    const first = await twokey.propose(apiKey, 'payout', { amount_cents: 1000 });
    const one = await approveFor(first.id, operator, { duration: String(HOUR) });
    const grantId = grantOf(one.headers.location);
    expect(await status(first.id)).toBe('pending');
    expect((await twokey.page('/console/grants', reviewer.cookie)).body).toContain('Waiting for a second approver');
    const waiting = await twokey.propose(apiKey, 'payout', { amount_cents: 1000 });
    expect(await status(waiting.id)).toBe('pending');

    const two = await approveFor(first.id, reviewer, { duration: String(HOUR) });
    expect(grantOf(two.headers.location)).toBe(grantId);
    expect(await status(first.id)).toBe('committed');
    const covered = await twokey.propose(apiKey, 'payout', { amount_cents: 5000 });
    expect((await twokey.services.store.getProposal(covered.id))?.decidedBy).toBe(`grant:${grantId}`);
    await twokey.form(`/console/grants/${grantId}/revoke`, { _csrf: operator.csrf }, { cookie: operator.cookie });
    await twokey.form(`/console/proposals/${waiting.id}/reject`, { _csrf: operator.csrf }, { cookie: operator.cookie });
  });

  it('a policy rule’s decision shows its decider and reason on the proposal page and in history', async () => {
    const small = await refund('acme', 50);
    const blocked = await refund('blocked', 5000);
    const smallPage = await twokey.page(`/console/proposals/${small.id}`, operator.cookie);
    expect(smallPage.body).toContain('policy:refund#0');
    expect(smallPage.body).toContain('refunds up to a dollar are automatic');
    expect(smallPage.body).toContain('a policy rule of the config');
    const blockedPage = await twokey.page(`/console/proposals/${blocked.id}`, operator.cookie);
    expect(blockedPage.body).toContain('policy:refund#1');
    expect(blockedPage.body).toContain('this customer is blocked from refunds');
    const history = await twokey.page('/console/history?operation=refund&status=rejected', operator.cookie);
    expect(history.body).toContain('policy:refund#1');
    expect(history.body).toContain('this customer is blocked from refunds');
  });
});
