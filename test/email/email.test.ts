import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { ALICE, BOB, CAROL, eventually, linksOf, SMTP_PASSWORD, startEmailTwokey, tokenOf, type EmailTwokey } from './helpers.js';

const address = (identity: string) => identity.slice('email:'.length);

describe.each(drivers)('email as an approval channel (%s)', (driver) => {
  let t: EmailTwokey;
  /** Moves twokey's clock without stopping it, to reach a link's expiry. */
  let skewMs = 0;
  const tokensSeen: string[] = [];

  beforeAll(async () => {
    t = await startEmailTwokey({ driver, clock: () => new Date(Date.now() + skewMs) });
  }, 120_000);
  afterAll(async () => {
    if (!t) return;
    // Nothing secret in any log line: the SMTP password (startTestTwokey checks it on close) and every link token.
    const logs = t.twokey.logs.join('');
    expect(logs).not.toContain(SMTP_PASSWORD);
    for (const token of tokensSeen) expect(logs).not.toContain(token);
    expect(logs).not.toMatch(/tk_mail_[A-Za-z0-9_-]{8,}/);
    await t.close();
  });

  async function propose(operation: string, params: Record<string, unknown>): Promise<string> {
    const response = await t.twokey.request('POST', '/v1/proposals', { apiKey: t.apiKey, body: { operation, params } });
    expect(response.status).toBe(201);
    return response.body.id as string;
  }

  /** The request mail a recipient got about a proposal. */
  async function mailFor(identity: string, proposalId: string) {
    const entry = await eventually(() => {
      const found = t.mail.to(address(identity)).find((candidate) => candidate.mail.text?.includes(proposalId) && !candidate.mail.inReplyTo);
      if (!found) throw new Error(`no mail to ${identity} about ${proposalId} yet`);
      return found;
    });
    const links = linksOf(entry.mail);
    tokensSeen.push(tokenOf(links.approve));
    return { ...entry, links };
  }

  const get = (url: string, headers: Record<string, string> = {}) => fetch(url, { headers, redirect: 'manual' });

  function post(form: Record<string, string>, headers: Record<string, string> = { 'sec-fetch-site': 'same-origin' }) {
    return fetch(`${t.baseUrl}/email/decide`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: t.baseUrl, ...headers },
      body: new URLSearchParams(form).toString(),
      redirect: 'manual',
    });
  }

  const formOf = (link: string, action: 'approve' | 'reject', extra: Record<string, string> = {}) => {
    const [, , , proposal, token] = new URL(link).pathname.split('/');
    return { token: token ?? '', proposal: proposal ?? '', action, ...extra };
  };

  const proposal = (id: string) => t.twokey.services.store.getProposal(id);

  it('mails each email approver one message, with links of their own, in text and HTML', async () => {
    const id = await propose('upgrade_plan', { org: 'acme', plan: 'scale' });
    const [alice, bob, carol] = await Promise.all([mailFor(ALICE, id), mailFor(BOB, id), mailFor(CAROL, id)]);
    for (const { mail } of [alice, bob, carol]) {
      expect(mail.subject).toBe('upgrade_plan (Pending): argus is requesting to upgrade acme to the scale plan.');
      expect(mail.from?.text).toContain('approvals@twokey.test');
      expect(mail.messageId).toMatch(new RegExp(`^<${id}\\.[0-9a-f]{16}\\.request@twokey\\.test>$`));
      expect(mail.text).toContain('argus is requesting to upgrade acme to the scale plan.');
      expect(mail.text).toContain('Approvals: 0 of 1');
      expect(mail.html).toContain('>Approve</a>');
      expect(mail.html).toContain('>Reject</a>');
    }
    // One mail each, each with its own token.
    expect(t.mail.received.filter((entry) => entry.mail.text?.includes(id))).toHaveLength(3);
    expect(new Set([alice, bob, carol].map(({ links }) => tokenOf(links.approve))).size).toBe(3);
    expect(tokenOf(alice.links.approve)).toBe(tokenOf(alice.links.reject));
    expect(tokenOf(alice.links.approve)).toMatch(/^tk_mail_[A-Za-z0-9_-]{43}$/);
  });

  it('decides nothing when a link is fetched (a mail scanner prefetching it): it shows a confirm page', async () => {
    const id = await propose('upgrade_plan', { org: 'initech', plan: 'pro' });
    const { links } = await mailFor(ALICE, id);
    for (const link of [links.approve, links.reject, links.approve]) {
      const page = await get(link);
      expect(page.status).toBe(200);
      expect(page.headers.get('referrer-policy')).toBe('no-referrer');
      expect(page.headers.get('cache-control')).toBe('no-store');
      const body = await page.text();
      expect(body).toContain('argus is requesting to upgrade initech to the pro plan.');
      expect(body).toContain('method="post" action="/email/decide"');
    }
    const after = await proposal(id);
    expect(after?.status).toBe('pending');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
    expect(t.downstream.requests.filter((request) => request.body.params && JSON.stringify(request.body).includes('initech'))).toHaveLength(0);
  });

  it('approves through the form once; the link is then spent, and the outcome is a reply in the thread', async () => {
    const id = await propose('upgrade_plan', { org: 'globex', plan: 'scale' });
    const { links, mail } = await mailFor(BOB, id);
    const decided = await post(formOf(links.approve, 'approve'));
    expect(decided.status).toBe(200);
    expect(await decided.text()).toContain('You approved this proposal.');
    const after = await proposal(id);
    expect(after?.status).toBe('committed');
    expect(after?.decidedBy).toBe(BOB);
    const runs = t.downstream.requests.filter((request) => JSON.stringify(request.body).includes('globex'));
    expect(runs).toHaveLength(1);

    // The same link again, by GET or POST: refused, nothing runs twice.
    expect((await get(links.approve)).status).toBe(410);
    const again = await post(formOf(links.approve, 'approve'));
    expect(again.status).toBe(410);
    expect(await again.text()).toContain('already used');
    expect((await post(formOf(links.reject, 'reject'))).status).toBe(410);
    expect(t.downstream.requests.filter((request) => JSON.stringify(request.body).includes('globex'))).toHaveLength(1);

    // The outcome, to every recipient, as a reply to the request they got.
    for (const identity of [ALICE, BOB, CAROL]) {
      const request = identity === BOB ? mail : (await mailFor(identity, id)).mail;
      const reply = await eventually(() => {
        const found = t.mail.to(address(identity)).find((entry) => entry.mail.inReplyTo === request.messageId);
        if (!found) throw new Error(`no outcome mailed to ${identity} yet`);
        return found.mail;
      });
      expect(reply.references).toBe(request.messageId);
      expect(reply.subject).toBe(`Re: ${request.subject}`);
      expect(reply.text).toContain('Committed');
      expect(reply.html).not.toContain('/email/approve/');
    }
  });

  it('decides once when the button is pressed twice at the same moment', async () => {
    const id = await propose('upgrade_plan', { org: 'stark', plan: 'scale' });
    const { links } = await mailFor(ALICE, id);
    const statuses = (await Promise.all([post(formOf(links.approve, 'approve')), post(formOf(links.approve, 'approve'))])).map((response) => response.status);
    expect(statuses.sort()).toEqual([200, 410]);
    expect((await proposal(id))?.status).toBe('committed');
    expect(t.downstream.requests.filter((request) => JSON.stringify(request.body).includes('stark'))).toHaveLength(1);
  });

  it('rejects with a reason', async () => {
    const id = await propose('upgrade_plan', { org: 'hooli', plan: 'scale' });
    const { links } = await mailFor(ALICE, id);
    const page = await (await get(links.reject)).text();
    expect(page).toContain('name="reason"');
    const decided = await post(formOf(links.reject, 'reject', { reason: 'Not this quarter.' }));
    expect(decided.status).toBe(200);
    expect(await decided.text()).toContain('You rejected this proposal.');
    const after = await proposal(id);
    expect(after).toMatchObject({ status: 'rejected', decidedBy: ALICE, decisionReason: 'Not this quarter.' });
    const reply = await eventually(() => {
      const found = t.mail.to(address(ALICE)).find((entry) => entry.mail.inReplyTo && entry.mail.text?.includes(id));
      if (!found) throw new Error('no outcome yet');
      return found.mail;
    });
    expect(reply.text).toContain('Not this quarter.');
  });

  it('refuses a link used for another proposal, a forged token, and a form from another site', async () => {
    const first = await propose('upgrade_plan', { org: 'umbrella', plan: 'pro' });
    const second = await propose('upgrade_plan', { org: 'tyrell', plan: 'pro' });
    const { links } = await mailFor(ALICE, first);
    await mailFor(ALICE, second);
    const token = tokenOf(links.approve);

    const elsewhere = `${t.baseUrl}/email/approve/${second}/${token}`;
    const shown = await get(elsewhere);
    expect(shown.status).toBe(404);
    expect(await shown.text()).toContain('made for another proposal');
    expect((await post({ token, proposal: second, action: 'approve' })).status).toBe(404);

    const forged = `${token.slice(0, -4)}AAAA`;
    expect((await get(`${t.baseUrl}/email/approve/${first}/${forged}`)).status).toBe(404);
    expect((await post({ token: forged, proposal: first, action: 'approve' })).status).toBe(404);
    expect((await get(`${t.baseUrl}/email/approve/${first}/not-a-token`)).status).toBe(404);
    expect((await post({ proposal: first, action: 'approve' })).status).toBe(400);

    const crossSite = await post(formOf(links.approve, 'approve'), { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    const foreignOrigin = await post(formOf(links.approve, 'approve'), { origin: 'https://evil.example' });
    expect(foreignOrigin.status).toBe(403);

    for (const id of [first, second]) expect((await proposal(id))?.status).toBe('pending');
    // None of those spent the link.
    expect((await post(formOf(links.approve, 'approve'))).status).toBe(200);
    expect((await proposal(first))?.status).toBe('committed');
    expect((await proposal(second))?.status).toBe('pending');
  });

  it('holds the owner ban: the agent’s owner, though an approver, cannot approve through their link', async () => {
    const id = await propose('upgrade_plan', { org: 'cyberdyne', plan: 'pro' });
    const { links } = await mailFor(CAROL, id);
    const shown = await get(links.approve);
    expect(shown.status).toBe(403);
    expect(await shown.text()).not.toContain('action="/email/decide"');
    const refused = await post(formOf(links.approve, 'approve'));
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain('You own the agent');
    expect((await proposal(id))?.status).toBe('pending');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
  });

  it('answers a passkey step-up operation with the console link, and decides nothing', async () => {
    const id = await propose('rotate_keys', { service: 'billing' });
    const { links } = await mailFor(ALICE, id);
    const consoleLink = `${t.baseUrl}/console/proposals/${id}`;
    const shown = await get(links.approve);
    expect(shown.status).toBe(403);
    expect(await shown.text()).toContain(consoleLink);
    const refused = await post(formOf(links.approve, 'approve'));
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain(consoleLink);
    expect((await proposal(id))?.status).toBe('pending');
    // The refusal did not spend the link: it can still reject.
    expect((await post(formOf(links.reject, 'reject'))).status).toBe(200);
    expect((await proposal(id))?.status).toBe('rejected');
  });

  it('counts a person once: alice by mail and alice in the console are one approval of two', async () => {
    const id = await propose('close_account', { org: 'soylent' });
    const { links } = await mailFor(ALICE, id);
    await t.twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'web' });
    const decided = await post(formOf(links.approve, 'approve'));
    expect(decided.status).toBe(200);
    expect((await proposal(id))?.status).toBe('pending');
    const bob = await mailFor(BOB, id);
    expect((await post(formOf(bob.links.approve, 'approve'))).status).toBe(200);
    expect((await proposal(id))?.status).toBe('committed');
  });

  it('replies with a reminder to those who have not approved, and mails the approver an escalation adds', async () => {
    const id = await propose('purge_backups', { bucket: 'archive-2019' });
    const [alice, bob] = await Promise.all([mailFor(ALICE, id), mailFor(BOB, id)]);
    expect((await post(formOf(alice.links.approve, 'approve'))).status).toBe(200);
    skewMs = 2 * 60_000 + 1_000;
    try {
      const reminder = await eventually(() => {
        const found = t.mail.to('bob@example.com').find((entry) => entry.mail.inReplyTo === bob.mail.messageId);
        if (!found) throw new Error('no reminder yet');
        return found.mail;
      });
      expect(reminder.subject).toBe(`Re: ${bob.mail.subject}`);
      expect(reminder.text).toMatch(/^Reminder /);
      expect(reminder.text).toContain('still waits for 1 approval');
      // Alice approved: she is not reminded.
      expect(t.mail.to('alice@example.com').filter((entry) => entry.mail.inReplyTo === alice.mail.messageId)).toHaveLength(0);

      skewMs = 4 * 60_000 + 1_000;
      const dave = await mailFor('email:dave@example.com', id);
      expect((await post(formOf(dave.links.approve, 'approve'))).status).toBe(200);
      expect((await proposal(id))?.status).toBe('committed');
    } finally {
      skewMs = 0;
    }
  });

  it('refuses an expired link', async () => {
    const id = await propose('upgrade_plan', { org: 'wonka', plan: 'pro' });
    const { links } = await mailFor(ALICE, id);
    skewMs = 11 * 60_000;
    try {
      const shown = await get(links.approve);
      expect(shown.status).toBe(410);
      expect(await shown.text()).toContain('expired');
      expect((await post(formOf(links.approve, 'approve'))).status).toBe(410);
    } finally {
      skewMs = 0;
    }
    expect((await proposal(id))?.status).toBe('pending');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
  });
});
