import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { ALICE, CONVERSATION, cardContent, eventually, executeActions, startTeamsTwokey, type TeamsTwokey } from './helpers.js';

const operation = (name: string, extra: string) => `
  - name: ${name}
    description: Delete a workspace
    params:
      type: object
      required: [workspace]
      properties:
        workspace: { type: string }
    summary: "{{agent}} wants to delete workspace {{params.workspace}}."
${extra}    approval:
      approvers: [teams:${ALICE}]
      teams: { conversation: "${CONVERSATION}" }
    commit: on_approve
    executor: { type: echo }
`;

const CONFIG = `
operations:${operation('guarded_delete', '    stepUp: passkey\n')}${operation('routine_delete', '    grants: { allow: true, maxDuration: 8h, durations: [1h, 8h] }\n')}`;

describe.each(drivers)('Teams: passkey step-up and "Approve for…" (%s)', (driver) => {
  let t: TeamsTwokey;

  beforeAll(async () => {
    t = await startTeamsTwokey({ driver, configYaml: CONFIG, env: { TWOKEY_PUBLIC_URL: 'https://twokey.example.test' } });
  });
  afterAll(() => t?.close());

  it('a click on a step-up proposal answers with the console link to it, and decides nothing', async () => {
    const { id } = await t.propose('guarded_delete', { workspace: 'acme' });
    const card = cardContent(await t.cardOf(id));
    // The card's own link to the console, as every channel has it.
    expect(card.actions).toContainEqual(expect.objectContaining({ type: 'Action.OpenUrl', url: `https://twokey.example.test/console/proposals/${id}` }));

    const answer = await t.click('twokey.approve', { proposalId: id }, ALICE);
    expect(answer.status).toBe(200);
    expect(answer.body.value).toContain('needs a passkey');
    expect(answer.body.value).toContain(`https://twokey.example.test/console/proposals/${id}`);
    await t.teams.settle();
    expect(await t.twokey.services.store.listApprovals(id)).toEqual([]);
    expect((await t.twokey.services.proposals.get(id)).status).toBe('pending');
  });

  it('"Approve for…" approves and grants for the first offered duration', async () => {
    const { id } = await t.propose('routine_delete', { workspace: 'one' });
    const card = cardContent(await t.cardOf(id));
    expect(executeActions(card).map((action) => action.verb)).toEqual(['twokey.approve', 'twokey.grant', 'twokey.reject']);
    const answer = await t.click('twokey.grant', { proposalId: id }, ALICE);
    expect(answer.body.value).toContain('You approved');
    await eventually(async () => expect((await t.twokey.services.proposals.get(id)).status).toBe('committed'));
    const grants = (await t.twokey.services.grants.list({})).filter((entry) => entry.grant.sourceProposalId === id);
    expect(grants).toHaveLength(1);
    expect(grants[0]?.grant).toMatchObject({ durationMs: 3_600_000, maxUses: null, createdBy: `teams:${ALICE}` });
  });

  it('"Approve for…" on an operation without grants is refused before anything is stored', async () => {
    const { id } = await t.propose('guarded_delete', { workspace: 'two' });
    const answer = await t.click('twokey.grant', { proposalId: id }, ALICE);
    expect(answer.body.value).toContain('does not allow approving for a while');
    expect(t.stored.filter((click) => click.proposalId === id)).toEqual([]);
  });
});
