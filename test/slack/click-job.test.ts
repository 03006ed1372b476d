/**
 * A stored Slack click's job is done when its decision is: the decision's transaction completes it
 * (no statement of its own), while the execution the approval started goes on under its own lease;
 * settling the inbox still waits for that execution.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rowsOf } from '../../src/db/rows.js';
import { drivers } from '../support/database.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { buttonClick, interactionBody } from './support/slack-requests.js';
import { rotateKeyConfig } from './support/rotate-key.js';
import { startSlackTwokey, type SlackTwokey } from './support/slack-twokey.js';

const WAIT = { timeout: 8_000, interval: 20 };
const SECRET = 'click-job-downstream-secret';
const config = (downstream: string) => rotateKeyConfig(downstream, SECRET);

describe.each(drivers)("a stored Slack click's job (%s)", (driver) => {
  let downstream: FakeDownstream;
  let twokey: SlackTwokey;

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    twokey = await startSlackTwokey({ driver, configYaml: config(downstream.url) });
  }, 180_000);
  afterAll(async () => {
    await twokey?.close();
    await downstream?.close();
  });

  const clickJobs = async (proposalId: string) =>
    rowsOf<{ status: string; attempts: number; locked_by: string | null }>(
      await twokey.services.database.db.execute(
        sql`select status, attempts, locked_by from jobs where kind = 'slack.click' and payload->>'proposalId' = ${proposalId}`,
      ),
    );

  it('is done once the approval commits, while the operation it started still runs', async () => {
    // The downstream call takes long enough to look at the click's job while it runs.
    downstream.setBehaviour('slow', 1_500);
    const proposed = await twokey.request('POST', '/v1/proposals', { apiKey: twokey.apiKey, body: { operation: 'rotate_key', params: { key: 'billing' } } });
    expect(proposed.status).toBe(201);
    const id = proposed.body.id as string;
    const answer = await twokey.post(interactionBody(buttonClick({ actionId: 'twokey_approve', proposalId: id, userId: 'U0ALICE' })));
    expect(answer.status).toBe(200);

    await vi.waitFor(async () => expect((await twokey.services.proposals.get(id)).status).toBe('executing'), WAIT);
    expect(await clickJobs(id)).toEqual([{ status: 'done', attempts: 1, locked_by: null }]);

    // Settling the stored clicks (what stopping the Slack integration does) waits for the execution too.
    await twokey.services.inbox.settle();
    expect((await twokey.services.proposals.get(id)).status).toBe('committed');
    // The worker took the decision's completion as its own: nothing dropped, nothing run again.
    expect(await clickJobs(id)).toEqual([{ status: 'done', attempts: 1, locked_by: null }]);
    expect(twokey.logs.join('')).not.toMatch(/no longer held by this worker/);
  });
});
