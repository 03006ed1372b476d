import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdminOperation } from '../../src/admin/operations.js';
import { drivers } from '../support/database.js';
import { configYaml, refundOperation } from '../support/operations.js';
import { csrfOf, startConsoleTwokey, type ConsoleTwokey } from './support.js';

const FINANCE_RULE = {
  when: 'params.amount_cents <= 100000 || "finance-leads" in approver.groups',
  reason: 'refunds over $1,000 need someone in finance-leads',
};

const CONFIG = configYaml(
  [
    refundOperation({ approvers: ['web:operator', 'oidc:fin', 'oidc:group:finance-leads'], commit: 'on_approve', approverRule: FINANCE_RULE }),
    // `note` is optional: a rule reading it errors on a proposal without one, and an error refuses.
    refundOperation({ approvers: ['web:operator'], commit: 'on_approve', note: true, approverRule: { when: 'params.note != "hold"' } }).replace(
      'name: refund',
      'name: refund_noted',
    ),
  ],
  `
people:
  - name: fin
    identities: [web:fin, oidc:fin]
`,
);

describe.each(drivers)('approver rules at a console click (%s)', (driver) => {
  let twokey: ConsoleTwokey;
  let apiKey: string;

  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver, configYaml: CONFIG });
    ({ apiKey } = await twokey.createAgent('argus', { owners: ['web:owner'] }));
  });
  afterAll(() => twokey.close());

  /** A session as an issuer opens it: identity and groups, whatever sign-in produced it. */
  async function signInVerified(identity: string, groups: string[]) {
    const { secret } = await twokey.web.auth.signInVerified(identity, groups, 'https://issuer.example');
    const cookie = `twokey_session=${secret}`;
    return { cookie, csrf: csrfOf((await twokey.page('/console', cookie)).body) };
  }

  it('a large refund is refused to an approver outside finance-leads, with the rule’s reason, and changes nothing', async () => {
    const { cookie, csrf } = await twokey.signIn('operator');
    const large = await twokey.propose(apiKey, 'refund', { amount_cents: 250_000 });
    const refused = await twokey.form(`/console/proposals/${large.id}/approve`, { _csrf: csrf }, { cookie });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('refunds over $1,000 need someone in finance-leads');
    expect(refused.body).toContain('Nothing was changed');
    expect((await twokey.services.proposals.get(large.id)).status).toBe('pending');
    expect(await twokey.services.store.listApprovals(large.id)).toEqual([]);

    // Rejecting stops the operation, so the rule does not stand in its way.
    expect((await twokey.form(`/console/proposals/${large.id}/reject`, { _csrf: csrf, reason: 'too large' }, { cookie })).status).toBe(303);
    expect((await twokey.services.proposals.get(large.id)).status).toBe('rejected');

    const small = await twokey.propose(apiKey, 'refund', { amount_cents: 5_000 });
    expect((await twokey.form(`/console/proposals/${small.id}/approve`, { _csrf: csrf }, { cookie })).status).toBe(303);
    expect((await twokey.services.proposals.get(small.id)).status).toBe('committed');
  });

  it('the issuer’s groups let a finance lead approve the large refund', async () => {
    const large = await twokey.propose(apiKey, 'refund', { amount_cents: 250_000 });
    const outsider = await signInVerified('oidc:fin', ['support']);
    expect((await twokey.form(`/console/proposals/${large.id}/approve`, { _csrf: outsider.csrf }, { cookie: outsider.cookie })).status).toBe(403);

    const lead = await signInVerified('oidc:lead', ['finance-leads']);
    // The card shows the button to the lead (through the issuer's group) and the rule's reason to others.
    expect((await twokey.page(`/console/proposals/${large.id}`, lead.cookie)).body).toContain(`action="/console/proposals/${large.id}/approve"`);
    const outsiderPage = (await twokey.page(`/console/proposals/${large.id}`, outsider.cookie)).body;
    expect(outsiderPage).not.toContain(`action="/console/proposals/${large.id}/approve"`);
    expect(outsiderPage).toContain('refunds over $1,000 need someone in finance-leads');
    const approved = await twokey.form(`/console/proposals/${large.id}/approve`, { _csrf: lead.csrf }, { cookie: lead.cookie });
    expect(approved.status).toBe(303);
    expect((await twokey.services.proposals.get(large.id)).status).toBe('committed');
    const [approval] = await twokey.services.store.listApprovals(large.id);
    expect(approval).toMatchObject({ approver: 'oidc:lead', matchedRule: 'oidc:group:finance-leads' });
  });

  it('a rule that cannot be evaluated refuses (fail closed)', async () => {
    const { cookie, csrf } = await twokey.signIn('operator');
    const withoutNote = await twokey.propose(apiKey, 'refund_noted', { amount_cents: 100 });
    const refused = await twokey.form(`/console/proposals/${withoutNote.id}/approve`, { _csrf: csrf }, { cookie });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('may not approve this proposal');
    expect((await twokey.services.proposals.get(withoutNote.id)).status).toBe('pending');

    const withNote = await twokey.propose(apiKey, 'refund_noted', { amount_cents: 100, note: 'ok' });
    expect((await twokey.form(`/console/proposals/${withNote.id}/approve`, { _csrf: csrf }, { cookie })).status).toBe(303);
  });

  it('`policy test` explains the rule for an approver and groups', async () => {
    const args = { operation: 'refund', params: '{"amount_cents": 250000}', agent: 'argus' };
    const unasked = (await runAdminOperation(twokey.services, 'policy.test', args)) as { approverRule: { result: string } };
    expect(unasked.approverRule.result).toContain('give --approver');
    const refused = (await runAdminOperation(twokey.services, 'policy.test', { ...args, approver: 'web:operator' })) as { approverRule: { result: string } };
    expect(refused.approverRule.result).toBe('refuses: refunds over $1,000 need someone in finance-leads');
    const allowed = (await runAdminOperation(twokey.services, 'policy.test', { ...args, approver: 'oidc:fin', groups: ['finance-leads'] })) as {
      approverRule: { result: string };
    };
    expect(allowed.approverRule.result).toBe('allows');
  });
});
