import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';
import { ALICE, APPLICATION_ID, CHANNEL, buttonPress, eventually, startDiscordTwokey, type DiscordTwokey } from './helpers.js';

const CONFIG = configYaml([
  `${deleteWorkspaceOperation({ approvers: [`discord:user:${ALICE}`], discord: CHANNEL, commit: 'on_approve' })}    stepUp: passkey\n`,
]);

describe.each(drivers)('Discord click on a passkey step-up proposal (%s)', (driver) => {
  let t: DiscordTwokey;
  const runs: string[] = [];

  beforeAll(async () => {
    t = await startDiscordTwokey({
      driver,
      configYaml: CONFIG,
      env: { TWOKEY_PUBLIC_URL: 'https://twokey.example.test' },
      executorFor: () => ({
        kind: 'local',
        async run(request) {
          runs.push(request.proposalId);
          return { ok: true };
        },
      }),
    });
  });
  afterAll(() => t?.close());

  it('does not decide: it answers privately with the console link to that proposal', async () => {
    const proposal = await t.propose('delete_workspace', { workspace: 'acme' });
    const answer = await t.interact(buttonPress(`twokey:approve:${proposal.id}`, { userId: ALICE }));
    expect(answer.status).toBe(200);
    const followUp = await eventually(() => {
      const call = t.fake.callsTo('POST', /^\/webhooks\//).find((c) => String(c.body.content).includes(proposal.id));
      expect(call).toBeDefined();
      return call!;
    });
    expect(followUp.path).toMatch(new RegExp(`^/webhooks/${APPLICATION_ID}/`));
    expect(followUp.body).toMatchObject({ flags: 64 });
    expect(String(followUp.body.content)).toContain(`https://twokey.example.test/console/proposals/${proposal.id}`);
    expect(String(followUp.body.content)).toContain('needs a passkey');
    expect(await t.twokey.services.store.listApprovals(proposal.id)).toEqual([]);
    expect((await t.twokey.services.store.getProposal(proposal.id))?.status).toBe('pending');
    expect(runs).toEqual([]);
  });
});
