import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { manualClock } from '../support/clock.js';
import { drivers } from '../support/database.js';
import { configYaml, deleteWorkspaceOperation } from '../support/operations.js';
import { buttonClick, interactionBody, rejectSubmission } from './support/slack-requests.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

const CONFIG = configYaml([
  `${deleteWorkspaceOperation({ approvers: ['slack:U0ALICE', 'slack:U0BOB'], slack: 'C0DANGER', commit: 'on_approve' })}    stepUp: passkey\n`,
]);

const WAIT = { timeout: 5_000, interval: 20 };

describe.each(drivers)('Slack click on a passkey step-up proposal (%s)', (driver) => {
  let twokey: SlackTwokey;
  const runs: string[] = [];

  beforeAll(async () => {
    twokey = await startSlackTwokey({
      driver,
      clock: manualClock(),
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
  afterAll(() => twokey?.close());

  const propose = async (workspace: string): Promise<string> => {
    const response = await twokey.request('POST', '/v1/proposals', { apiKey: twokey.apiKey, body: { operation: 'delete_workspace', params: { workspace } } });
    expect(response.status).toBe(201);
    return (response.body as { id: string }).id;
  };
  const ephemeralsTo = (user: string) => twokey.fake.callsTo('chat.postEphemeral').filter((call) => call.args.user === user);

  it('does not decide: it answers privately with the console link to that proposal', async () => {
    const id = await propose('acme');
    const answer = await twokey.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE', channel: 'C0DANGER' })));
    expect(answer.status).toBe(200);
    const told = await vi.waitFor(() => {
      const found = ephemeralsTo('U0ALICE').find((call) => String(call.args.text).includes(id));
      if (!found) throw new Error('not told yet');
      return String(found.args.text);
    }, WAIT);
    expect(told).toContain('needs a passkey');
    expect(told).toContain(`https://twokey.example.test/console/proposals/${id}`);
    expect(told).toContain('Nothing');
    expect(await twokey.services.store.listApprovals(id)).toEqual([]);
    expect((await twokey.services.store.getProposal(id))?.status).toBe('pending');
    expect(runs).toEqual([]);
  });

  it('rejects without a passkey', async () => {
    const id = await propose('globex');
    const answer = await twokey.post(interactionBody(rejectSubmission({ proposalId: id, userId: 'U0BOB', reason: 'not today' })));
    expect(answer.status).toBe(200);
    await vi.waitFor(async () => expect((await twokey.services.store.getProposal(id))?.status).toBe('rejected'), WAIT);
  });
});
