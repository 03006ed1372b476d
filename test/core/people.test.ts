import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ExecutionRequest, Executor } from '../../src/core/executor.js';
import { buttonClick, interactionBody, type SlackPoster } from '../slack/support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from '../slack/support/slack-twokey.js';
import { csrfOf } from '../console/support.js';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';

/**
 * alice is one human with a console account and a Slack account; olga owns the agent and also has
 * both. Quorum 2 must take two humans, whatever accounts they click with.
 */
const CONFIG = configYaml(
  [
    deleteWorkspaceOperation({
      approvers: ['web:alice', 'slack:U0ALICE', 'web:bob', 'slack:U0OLGA'],
      quorum: 2,
      slack: 'C0DANGER',
      commit: 'on_approve',
    }),
  ],
  `people:
  - name: alice
    identities: [web:alice, slack:U0ALICE]
  - name: olga
    identities: [web:olga, slack:U0OLGA]
`,
);

const WAIT = { timeout: 15_000, interval: 20 };

describe.each(drivers)('people: quorum counts persons (%s)', (driver) => {
  const clock = manualClock();
  const executed: ExecutionRequest[] = [];
  const executor: Executor = {
    kind: 'local',
    async run(request) {
      executed.push(request);
      return { deleted: request.params.workspace };
    },
  };
  let twokey: SlackTwokey;
  let apiKey: string;
  let slack: SlackPoster;

  beforeAll(async () => {
    twokey = await startSlackTwokey({ driver, clock, configYaml: CONFIG, executorFor: () => executor, agent: { name: 'argus', owners: ['web:olga'] } });
    ({ apiKey, post: slack } = twokey);
  });
  afterAll(() => twokey?.close());

  async function propose(workspace: string): Promise<string> {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace } } });
    expect(response.status).toBe(201);
    return response.body.id;
  }
  const approve = (id: string, identity: string, via = 'test') => twokey.services.proposals.approve(id, { identity, via });
  const approvals = (id: string) => twokey.services.store.listApprovals(id);

  async function signIn(name: string) {
    const { token } = await twokey.webConsole.auth.mintLink(name);
    const response = await twokey.app.inject({
      method: 'POST',
      url: '/console/login',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ token }).toString(),
    });
    const cookie = response.cookies[0];
    if (!cookie) throw new Error('sign-in failed');
    const header = `${cookie.name}=${cookie.value}`;
    const page = await twokey.app.inject({ method: 'GET', url: '/console', headers: { cookie: header } });
    return { cookie: header, csrf: csrfOf(page.body) };
  }

  it('a person approving through a second identity counts once (already_counted); a second person completes the quorum', async () => {
    const id = await propose('one');
    expect((await approve(id, 'web:alice')).outcome).toBe('counted');
    const again = await approve(id, 'slack:U0ALICE');
    expect(again.outcome).toBe('already_counted');
    expect(again.proposal.status).toBe('pending');
    expect(await approvals(id)).toHaveLength(1);

    const done = await approve(id, 'web:bob');
    expect(done).toMatchObject({ outcome: 'quorum_reached', proposal: { status: 'committed' } });
    expect(executed.find((r) => r.proposalId === id)?.approvedBy).toEqual(['web:alice', 'web:bob']);
    const approved = (await twokey.services.audit.list({ proposalId: id })).find((e) => e.type === 'proposal.approved');
    expect(approved?.data).toMatchObject({ approvers: ['web:alice', 'web:bob'], quorum: 2 });
  });

  it("the owner rule covers every identity of the owner's person", async () => {
    const id = await propose('two');
    // slack:U0OLGA is on the approvers list and is not itself an owner; olga is, through web:olga.
    await expect(approve(id, 'slack:U0OLGA')).rejects.toMatchObject({ code: 'owner_cannot_approve', message: expect.stringContaining('through web:olga') });
    await expect(twokey.services.proposals.reject(id, { identity: 'slack:U0OLGA', via: 'test' }, 'mine')).rejects.toMatchObject({
      code: 'owner_cannot_approve',
    });
    expect(await approvals(id)).toHaveLength(0);
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');

    // The preview every transport shows says the same.
    const preview = await twokey.services.proposals.preview(id, 'approve', { identity: 'slack:U0OLGA', via: 'slack' });
    expect(preview).toMatchObject({ allowed: false, code: 'owner_cannot_approve' });
  });

  it('40 concurrent approvals by one person through two identities count once', async () => {
    const id = await propose('race');
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, i) => approve(id, i % 2 === 0 ? 'web:alice' : 'slack:U0ALICE', i % 2 === 0 ? 'web' : 'slack')),
    );
    expect(outcomes.filter((o) => o.outcome === 'counted')).toHaveLength(1);
    expect(outcomes.filter((o) => o.outcome === 'already_counted')).toHaveLength(39);
    expect(await approvals(id)).toHaveLength(1);
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');
  });

  it('the same person clicking in Slack and in the console at once is counted once', async () => {
    const id = await propose('both-channels');
    const { cookie, csrf } = await signIn('alice');
    const slackApprovalsBefore = twokey.logs.filter((line) => line.includes('"msg":"Slack approval"')).length;
    const clicks = Array.from({ length: 5 }, () => slack(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE' }))));
    const forms = Array.from({ length: 5 }, () =>
      twokey.app.inject({
        method: 'POST',
        url: `/console/proposals/${id}/approve`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
        payload: new URLSearchParams({ _csrf: csrf, return: '/console' }).toString(),
      }),
    );
    const [slackAnswers, formAnswers] = await Promise.all([Promise.all(clicks), Promise.all(forms)]);
    expect(slackAnswers.map((a) => a.status)).toEqual(Array(5).fill(200));
    expect(formAnswers.map((a) => a.statusCode)).toEqual(Array(5).fill(303));
    // Every Slack click has been decided (each logs its outcome) before counting.
    await vi.waitFor(() => expect(twokey.logs.filter((line) => line.includes('"msg":"Slack approval"')).length).toBe(slackApprovalsBefore + 5), WAIT);

    const recorded = await approvals(id);
    expect(recorded).toHaveLength(1);
    expect(['web:alice', 'slack:U0ALICE']).toContain(recorded[0]?.approver);
    expect((await twokey.services.proposals.get(id)).status).toBe('pending');
    expect(executed.filter((r) => r.proposalId === id)).toHaveLength(0);
    // The console said "already counted" to every form but (at most) the one that counted.
    const locations = formAnswers.map((a) => String(a.headers.location));
    expect(locations.filter((l) => l.includes('done=approve')).length).toBeLessThanOrEqual(1);
    expect(locations.filter((l) => l.includes('done=already')).length).toBeGreaterThanOrEqual(4);

    // And the console shows alice as approved, whatever account counted.
    const page = await twokey.app.inject({ method: 'GET', url: `/console/proposals/${id}`, headers: { cookie } });
    expect(page.body).toContain('You approved; waiting for 1 more.');
    expect(page.body).not.toContain(`/console/proposals/${id}/approve"`);
  });
});
