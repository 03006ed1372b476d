import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleTwokey, type ConsoleTwokey } from './support.js';

describe('console route schemas', () => {
  let twokey: ConsoleTwokey;
  let session: { cookie: string; csrf: string };
  beforeAll(async () => {
    twokey = await startConsoleTwokey({ driver: 'pglite' });
    session = await twokey.signIn('operator');
  });
  afterAll(async () => twokey.close());

  it('refuses a proposal id longer than any id with a 400 page naming the field, changing nothing', async () => {
    const answer = await twokey.form(`/console/proposals/${'p'.repeat(65)}/approve`, { _csrf: session.csrf }, { cookie: session.cookie });
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toMatch(/text\/html/);
    expect(answer.body).toMatch(/id/);
    expect(await twokey.services.store.listAudit({ limit: 1000 })).not.toContainEqual(expect.objectContaining({ type: 'approval.recorded' }));
  });

  it('a repeated CSRF field is still refused as missing, as before the schemas', async () => {
    const { id } = await twokey.propose((await twokey.createAgent('argus')).apiKey, 'upgrade_plan', { org: 'acme', plan: 'pro' });
    const body = new URLSearchParams([
      ['_csrf', session.csrf],
      ['_csrf', session.csrf],
    ]).toString();
    const answer = await twokey.app.inject({
      method: 'POST',
      url: `/console/proposals/${id}/approve`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: session.cookie },
      payload: body,
    });
    expect(answer.statusCode).toBe(403);
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');
  });
});
