/**
 * The request identity's claim against a caller recording its proposal at that moment, on
 * PostgreSQL, made deterministic: the recording transaction holds the identity's row while the
 * claim starts, so the claim's snapshot predates the proposal and the claim waits on the row. When
 * the row comes free it names a proposal that snapshot cannot see. The claim must leave the
 * identity to that proposal, not take it over and propose a second request. (Seen in CI as two
 * requests for twenty identical calls; the old claim, "not exists", failed exactly this test.)
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRequestIdentityStore } from '../../src/db/request-identity-store.js';
import type { Database } from '../../src/db/database.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { configYaml, upgradePlanOperation } from '../support/operations.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describeOnPostgres('a request identity claimed while its proposal is being recorded', (driver) => {
  let database: Database & { url?: string };
  let twokey: TestTwokey;
  let recorder: postgres.Sql;

  beforeAll(async () => {
    database = await openTestDatabase(driver);
    twokey = await startTestTwokey({ driver, database, configYaml: configYaml([upgradePlanOperation({ approvers: ['web:alice'] })]) });
    recorder = postgres(database.url!, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await recorder?.end();
    await twokey?.close();
    await database?.close();
  });

  it('leaves the identity to the proposal committed after the claim began, and answers with it', async () => {
    const store = createRequestIdentityStore(database.db);
    const { id: agentId } = await twokey.createAgent('argus');
    const agent = (await twokey.services.store.getAgent(agentId))!;
    const template = await twokey.services.proposals.propose(agent, { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } });
    const now = new Date();
    const key = `race-${randomBytes(4).toString('hex')}`;
    expect(await store.claim(key, agentId, now, 15_000)).toEqual({ claimed: true });

    const proposalId = `prp_race${randomBytes(6).toString('hex')}`;
    let claim: ReturnType<typeof store.claim> | undefined;
    await recorder.begin(async (tx) => {
      // The proposal and the identity's id in one transaction, uncommitted: the row is held.
      await tx`insert into proposals select * from jsonb_populate_record(null::proposals,
                 (select to_jsonb(p) || jsonb_build_object('id', ${proposalId}::text, 'token_hash', ${randomBytes(16).toString('hex')}::text)
                    from proposals p where p.id = ${template.proposal.id}))`;
      await tx`update request_identities set proposal_id = ${proposalId}, claimed_until = ${now} where key = ${key}`;
      // A second caller's claim, its claimed window long past: its snapshot is taken now, then it waits on the row.
      claim = store.claim(key, agentId, new Date(now.getTime() + 60_000), 15_000);
      await expect.poll(async () => (await tx`select count(*)::int as n from pg_locks where not granted`)[0]!.n, { timeout: 10_000 }).toBeGreaterThan(0);
    });
    expect(await claim).toEqual({ claimed: false, proposalId, sealedToken: null });
  });
});
