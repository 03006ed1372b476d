import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import type { Database } from '../../src/db/database.js';

const configWith = (approvers: string, summary: string, extraOperation = true) => `
operations:
  - name: upgrade_plan
    description: Change a plan
    params: { type: object, required: [org], properties: { org: { type: string } } }
    summary: "${summary}"
    approval: { approvers: [${approvers}], quorum: 1 }
    commit: agent
    executor: { type: echo }
${
  extraOperation
    ? `  - name: delete_workspace
    description: Delete a workspace
    params: { type: object, required: [workspace], properties: { workspace: { type: string } } }
    summary: "{{agent}} deletes {{params.workspace}}"
    approval: { approvers: [web:alice], quorum: 1 }
    executor: { type: echo }
`
    : ''
}`;

/** The config changes between propose and decision (a restart with a new file, a reload): the rules of now apply, and the human's summary does not move. */
describe.each(drivers)('config changes while proposals are pending (%s)', (driver) => {
  let database: Database;
  let before: TestTwokey;
  let after: TestTwokey;
  let apiKey: string;
  const ids: Record<string, { id: string; token: string }> = {};

  beforeAll(async () => {
    database = await openTestDatabase(driver);
    before = await startTestTwokey({ driver, database, configYaml: configWith('web:alice, web:bob', '{{agent}} upgrades {{params.org}}') });
    ({ apiKey } = await before.createAgent('drifter'));
    for (const name of ['approvedByAlice', 'pendingForAlice', 'template']) {
      const proposed = await before.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: name } } });
      ids[name] = { id: proposed.body.id, token: proposed.body.confirmToken };
    }
    const doomed = await before.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'w' } } });
    ids.removedOperation = { id: doomed.body.id, token: doomed.body.confirmToken };
    await before.services.proposals.approve(ids.approvedByAlice!.id, { identity: 'web:alice', via: 'test' });
    await before.close();
    // Alice is no longer an approver, the summary template changed, delete_workspace is gone.
    after = await startTestTwokey({ driver, database, configYaml: configWith('web:bob', 'NEW TEMPLATE for {{params.org}}', false) });
  });
  afterAll(async () => {
    await after.close();
    await database.close();
  });

  it('an approver removed from the list after the proposal was made cannot approve it', async () => {
    await expect(after.services.proposals.approve(ids.pendingForAlice!.id, { identity: 'web:alice', via: 'test' })).rejects.toMatchObject({
      code: 'not_an_approver',
    });
    expect((await after.services.proposals.get(ids.pendingForAlice!.id)).status).toBe('pending');
  });

  it('an approval given by an approver since removed no longer counts at commit', async () => {
    const commit = await after.request('POST', `/v1/proposals/${ids.approvedByAlice!.id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': ids.approvedByAlice!.token },
      body: { operation: 'upgrade_plan', params: { org: 'approvedByAlice' } },
    });
    expect(commit).toMatchObject({ status: 403, body: { error: { code: 'not_approved', message: expect.stringContaining('0 of 1') } } });
    expect((await after.services.proposals.get(ids.approvedByAlice!.id)).consumedAt).toBeNull();
  });

  it('a proposal whose operation was removed from the config cannot be approved or committed, and still reads', async () => {
    const { id, token } = ids.removedOperation!;
    await expect(after.services.proposals.approve(id, { identity: 'web:alice', via: 'test' })).rejects.toMatchObject({ code: 'operation_removed' });
    const commit = await after.request('POST', `/v1/proposals/${id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': token },
      body: { operation: 'delete_workspace', params: { workspace: 'w' } },
    });
    expect(commit.status).toBeGreaterThanOrEqual(400);
    expect(commit.status).toBeLessThan(500);
    const read = await after.request('GET', `/v1/proposals/${id}`, { apiKey });
    expect(read).toMatchObject({ status: 200, body: { status: 'pending', operation: 'delete_workspace' } });
  });

  it('pending proposals keep the summary the human saw when the template changes', async () => {
    const read = await after.request('GET', `/v1/proposals/${ids.template!.id}`, { apiKey });
    expect(read.body.summary).toBe('drifter upgrades template');
    await after.services.proposals.approve(ids.template!.id, { identity: 'web:bob', via: 'test' });
    const commit = await after.request('POST', `/v1/proposals/${ids.template!.id}/commit`, {
      apiKey,
      headers: { 'x-confirmation-token': ids.template!.token },
      body: { operation: 'upgrade_plan', params: { org: 'template' } },
    });
    expect(commit.body.status).toBe('committed');
    const fresh = await after.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: 'later' } } });
    expect(fresh.body.summary).toBe('NEW TEMPLATE for later');
  });
});
