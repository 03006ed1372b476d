import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/rows.js';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import {
  ALICE,
  APP_ID,
  BOB,
  CONVERSATION,
  MALLORY,
  OWNER,
  cardAction,
  cardContent,
  eventually,
  executeActions,
  startTeamsTwokey,
  type TeamsTwokey,
} from './helpers.js';

const EXECUTOR_SECRET = 'teams-executor-secret-0123456789';

const config = (downstream: string) => `
operations:
  - name: delete_workspace
    description: Delete a workspace
    params:
      type: object
      required: [workspace]
      properties:
        workspace: { type: string }
    summary: "{{agent}} wants to delete workspace {{params.workspace}}."
    approval:
      approvers: [teams:${ALICE}, teams:${BOB}, teams:${OWNER}]
      teams: { conversation: "${CONVERSATION}" }
    commit: on_approve
    executor: { type: http, url: "${downstream}/delete", secret: "${EXECUTOR_SECRET}", timeout: 5s }
  - name: rotate_keys
    description: Rotate the production signing keys
    params:
      type: object
      required: [service]
      properties:
        service: { type: string }
    summary: "{{agent}} wants to rotate the keys of {{params.service}}."
    approval:
      approvers: [teams:${ALICE}, web:alice, teams:${BOB}]
      quorum: 2
      teams: { conversation: "${CONVERSATION}" }
    commit: on_approve
    executor: { type: echo }
people:
  - { name: alice, identities: [web:alice, "teams:${ALICE}"] }
`;

describe.each(drivers)('Teams: cards and clicks (%s)', (driver) => {
  let t: TeamsTwokey;
  let downstream: FakeDownstream;

  beforeAll(async () => {
    downstream = await startFakeDownstream(EXECUTOR_SECRET);
    t = await startTeamsTwokey({ driver, configYaml: config(downstream.url) });
  });
  afterAll(async () => {
    await t?.close();
    await downstream?.close();
  });

  it('posts a proposal as an Adaptive Card to the configured conversation, with a bot token from the app credentials', async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'acme' });
    const card = await t.cardOf(id);
    expect(card.body.type).toBe('message');
    expect(card.body.attachments[0].contentType).toBe('application/vnd.microsoft.card.adaptive');
    const content = cardContent(card);
    expect(content).toMatchObject({ type: 'AdaptiveCard', version: '1.4' });
    expect(executeActions(content).map((action) => action.verb)).toEqual(['twokey.approve', 'twokey.reject']);
    expect(executeActions(content).every((action) => action.data.proposalId === id)).toBe(true);
    // The reject button opens a form on the card with the reason's Input.Text.
    const reject = content.actions.find((action: any) => action.type === 'Action.ShowCard');
    expect(reject.card.body[0]).toMatchObject({ type: 'Input.Text', id: 'reason' });
    expect(JSON.stringify(content)).toContain('argus wants to delete workspace acme.');

    const post = t.fake.callsTo('POST', /\/activities$/).find((call) => JSON.stringify(call.body).includes(id));
    expect(post?.path).toBe(`/v3/conversations/${CONVERSATION}/activities`);
    expect(post?.authorization).toMatch(/^Bearer bot-/);
    expect(t.fake.tokenRequests[0]).toMatchObject({ grant_type: 'client_credentials', client_id: APP_ID, scope: 'https://api.botframework.com/.default' });
  });

  it("an approver's Approve runs the operation once, answers the clicker, and replaces the card in place", async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'once' });
    const card = await t.cardOf(id);
    const before = downstream.requests.length;

    const answer = await t.click('twokey.approve', { proposalId: id }, ALICE);
    expect(answer).toEqual({
      status: 200,
      body: { statusCode: 200, type: 'application/vnd.microsoft.activity.message', value: expect.stringContaining('You approved') },
    });
    expect(t.stored.filter((click) => click.proposalId === id)).toHaveLength(1);
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('committed'));

    // A second approver arriving late changes nothing and runs nothing.
    const late = await t.click('twokey.approve', { proposalId: id }, BOB);
    expect(late.body.value).toMatch(/Nothing was changed\.$/);
    await t.teams.settle();
    expect(downstream.requests.length - before).toBe(1);
    expect(downstream.requests.at(-1)?.signatureValid).toBe(true);

    await eventually(() => {
      const replaced = t.fake.callsTo('PUT', new RegExp(`/activities/${card.id}$`)).at(-1);
      expect(JSON.stringify(replaced?.body)).toContain('Committed');
      expect(executeActions(replaced?.body.attachments[0].content)).toEqual([]);
    });
    expect(t.fake.activities.get(card.id)?.edits).toBeGreaterThan(0);
  });

  it("an Approve's stored click is done once the decision commits, while the operation it started still runs", async () => {
    downstream.setBehaviour('slow', 1_500);
    try {
      const { id } = await t.propose('delete_workspace', { workspace: 'slow' });
      await t.cardOf(id);
      // The clicker's answer waits for the outcome (up to its budget): looked at while it is on its way.
      const answering = t.click('twokey.approve', { proposalId: id }, ALICE);
      await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('executing'));
      const jobs = rowsOf<{ status: string; attempts: number }>(
        await t.twokey.services.database.db.execute(sql`select status, attempts from jobs where kind = 'teams.click' and payload->>'proposalId' = ${id}`),
      );
      expect(jobs).toEqual([{ status: 'done', attempts: 1 }]);
      // Settling the stored clicks still waits for the operation.
      await t.teams.settle();
      expect((await t.twokey.services.proposals.get(id)).status).toBe('committed');
      expect((await answering).status).toBe(200);
    } finally {
      downstream.setBehaviour('ok');
    }
  });

  it('quorum 2: the first approval says how many more it waits for; the same person again, in Teams or the console, counts once', async () => {
    const { id } = await t.propose('rotate_keys', { service: 'billing' });
    await t.cardOf(id);
    const first = await t.click('twokey.approve', { proposalId: id }, ALICE);
    expect(first.body.value).toBe('You approved; waiting for 1 more approval (1 of 2).');
    const again = await t.click('twokey.approve', { proposalId: id }, ALICE);
    expect(again.body.value).toContain('Your approval is already counted (1 of 2)');
    const inConsole = await t.twokey.services.proposals.approve(id, { identity: 'web:alice', via: 'web' });
    expect(inConsole.outcome).toBe('already_counted');
    const second = await t.click('twokey.approve', { proposalId: id }, BOB);
    expect(second.body.value).toContain('You approved');
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('committed'));
  });

  it('Reject with the reason typed on the card rejects, and the card shows the reason', async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'keep-me' });
    const card = await t.cardOf(id);
    const answer = await t.click('twokey.reject', { proposalId: id, reason: '  not on a Friday  ' }, BOB);
    expect(answer.body.value).toContain('You rejected it');
    const proposal = await t.twokey.services.proposals.get(id);
    expect(proposal).toMatchObject({ status: 'rejected', decidedBy: `teams:${BOB}`, decisionReason: 'not on a Friday' });
    await eventually(() => {
      const replaced = t.fake.callsTo('PUT', new RegExp(`/activities/${card.id}$`)).at(-1);
      expect(JSON.stringify(replaced?.body)).toContain('not on a Friday');
    });
  });

  it('a click from someone not on the approvers list is refused with the reason, and decides nothing', async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'mallory' });
    await t.cardOf(id);
    const answer = await t.click('twokey.approve', { proposalId: id }, MALLORY);
    expect(answer.status).toBe(200);
    expect(answer.body.value).toContain('not an approver');
    expect(answer.body.value).toContain('Nothing was changed.');
    expect(t.stored.filter((click) => click.proposalId === id)).toEqual([]);
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
  });

  it("the agent's owner is refused though on the approvers list: two keys means two people", async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'own' });
    const answer = await t.click('twokey.approve', { proposalId: id }, OWNER);
    expect(answer.body.value).toContain('You own the agent');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
  });

  it('a click with no Entra object id is refused: twokey cannot tell who it is', async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'anon' });
    const answer = await t.click('twokey.approve', { proposalId: id }, undefined);
    expect(answer.body.value).toContain('could not tell who you are');
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
  });

  it('no token, a bad signature, a foreign key, a foreign issuer, a wrong audience or another serviceUrl → 401 with no body, nothing stored', async () => {
    const { id } = await t.propose('delete_workspace', { workspace: 'forged' });
    await t.cardOf(id);
    const activity = cardAction('twokey.approve', { proposalId: id }, { aadObjectId: ALICE }, t.fake);
    const good = await t.fake.sign();
    const [header, payload, signature] = good.split('.');
    const flipped = `${signature!.slice(0, -4)}${signature!.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    const attempts = {
      none: null,
      notBearer: `Basic ${Buffer.from(`${APP_ID}:x`).toString('base64')}`,
      badSignature: `Bearer ${header}.${payload}.${flipped}`,
      foreignKey: `Bearer ${await t.fake.sign({}, { key: 'foreign' })}`,
      // The channel's own key id on a token the foreign key signed.
      foreignKeyKnownKid: `Bearer ${await t.fake.sign({}, { key: 'foreign', kid: JSON.parse(Buffer.from(header!, 'base64url').toString()).kid })}`,
      foreignIssuer: `Bearer ${await t.fake.sign({ iss: 'https://issuer.example.test' })}`,
      wrongAudience: `Bearer ${await t.fake.sign({ aud: '99999999-9999-4999-8999-999999999999' })}`,
      otherService: `Bearer ${await t.fake.sign({ serviceUrl: 'https://smba.example.test/teams/' })}`,
    };
    for (const [name, authorization] of Object.entries(attempts)) {
      const response = await t.post(activity, { authorization });
      expect({ name, status: response.status, body: response.body }).toEqual({ name, status: 401, body: null });
    }
    // An activity pointing at another service, with a token for the real one.
    const redirected = await t.post(
      cardAction('twokey.approve', { proposalId: id }, { aadObjectId: ALICE }, t.fake, { serviceUrl: 'https://smba.example.test/teams/' }),
    );
    expect(redirected.status).toBe(401);
    expect(t.stored.filter((click) => click.proposalId === id)).toEqual([]);
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
  });

  it('a signed body that is not an activity is a 400 naming the problem; other activities are acknowledged', async () => {
    const garbled = await t.post(null, { rawBody: '{"type":' });
    expect(garbled.status).toBe(400);
    expect(garbled.body.error.code).toBe('invalid_json');
    const noAction = await t.post({ type: 'invoke', name: 'adaptiveCard/action', id: 'f:1', serviceUrl: t.fake.serviceUrl, value: {} });
    expect(noAction.status).toBe(400);
    expect(noAction.body.error.message).toContain('Action.Execute');
    const message = await t.post({ type: 'message', id: 'm:1', serviceUrl: t.fake.serviceUrl, text: 'hello' });
    expect(message).toEqual({ status: 200, body: null });
  });

  it('the app password reaches the token endpoint only', async () => {
    // The suite's close scans logs, answers and everything the fake received for it; here, the calls' headers too.
    expect(t.fake.calls.every((call) => !JSON.stringify(call).includes(t.twokey.secrets.find((secret) => secret.startsWith('teams-app-password'))!))).toBe(
      true,
    );
  });
});
