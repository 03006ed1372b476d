import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resumeStates } from '../../src/db/schema.js';
import { drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describe.each(drivers)('PUT/GET /v1/proposals/:id/resume-state (%s)', (driver) => {
  let twokey: TestTwokey;
  let owner: string;
  let other: string;
  let proposalId: string;
  beforeAll(async () => {
    twokey = await startTestTwokey({ driver });
    owner = (await twokey.createAgent('runner')).apiKey;
    other = (await twokey.createAgent('stranger')).apiKey;
    const created = await twokey.request('POST', '/v1/proposals', { apiKey: owner, body: { operation: 'delete_workspace', params: { workspace: 'w1' } } });
    proposalId = created.body.id;
  });
  afterAll(async () => twokey.close());

  it('keeps what the agent parked and gives it back to the same key only', async () => {
    const state = JSON.stringify({ run: 'paused', messages: ['é', '🙂'] });
    expect((await twokey.request('PUT' as 'POST', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner, body: { state } })).status).toBe(204);
    expect(await twokey.request('GET', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner })).toMatchObject({ status: 200, body: { state } });

    // Another agent sees neither the proposal nor its state, and cannot overwrite it.
    expect((await twokey.request('GET', `/v1/proposals/${proposalId}/resume-state`, { apiKey: other })).body.error.code).toBe('not_found');
    expect((await twokey.request('PUT' as 'POST', `/v1/proposals/${proposalId}/resume-state`, { apiKey: other, body: { state: 'x' } })).body.error.code).toBe(
      'not_found',
    );
    expect((await twokey.request('GET', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner })).body).toEqual({ state });
  });

  it('stores it sealed: the database never holds the plaintext', async () => {
    const secretish = 'conversation that must stay private';
    await twokey.request('PUT' as 'POST', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner, body: { state: secretish } });
    const rows = await twokey.services.database.db.select().from(resumeStates);
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.sealed).toMatchObject({ v: 1, iv: expect.any(String), tag: expect.any(String), data: expect.any(String) });
      expect(JSON.stringify(row.sealed)).not.toContain(secretish);
    }
  });

  it('refuses bad input with a 4xx naming the problem, changing nothing', async () => {
    const before = (await twokey.request('GET', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner })).body;
    const missing = await twokey.request('PUT' as 'POST', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner, body: { nope: 1 } });
    expect(missing.status).toBe(400);
    expect(JSON.stringify(missing.body)).toContain('state');
    expect((await twokey.request('PUT' as 'POST', `/v1/proposals/prp_unknown/resume-state`, { apiKey: owner, body: { state: 'x' } })).status).toBe(404);
    expect((await twokey.request('GET', `/v1/proposals/${proposalId}/resume-state`)).status).toBe(401);
    expect((await twokey.request('GET', `/v1/proposals/${proposalId}/resume-state`, { apiKey: owner })).body).toEqual(before);
  });
});
