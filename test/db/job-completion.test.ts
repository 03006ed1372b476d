import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { jobs } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { agentRecord, proposalRecord } from '../support/records.js';

/**
 * A stored click's job is completed by the decision it makes, in the decision's own statement
 * (`StoreTransaction.completeJob`): done exactly when the decision commits, fenced by the claim stamp
 * like any completion, and never when the decision fails.
 */
describe.each(drivers)('a job completed by a transaction (%s)', (driver) => {
  let database: Database;
  const at = new Date('2026-11-29T10:00:00.000Z');

  beforeAll(async () => {
    database = await openTestDatabase(driver);
    await createStore(database.db).transaction(async (tx) => {
      await tx.insertAgent(agentRecord('agt_1', at));
    });
  }, 180_000);
  afterAll(() => database.close());

  /** A proposal to decide, and a click job for it claimed by worker `w_test`, with `behind` more clicks queued after it. */
  async function claimedClick(proposalId: string, behind = 0) {
    const store = createStore(database.db);
    await store.transaction(async (tx) => {
      await tx.insertProposal(proposalRecord({ id: proposalId, tokenHash: `token_${proposalId}`, createdAt: at }));
    });
    const jobStore = createJobStore(database.db);
    const click = { kind: 'slack.click', payload: { proposalId }, orderingKey: `click:${proposalId}`, maxAttempts: 5 };
    await jobStore.insertMany(
      Array.from({ length: 1 + behind }, () => click),
      at,
    );
    // Clicks left queued by earlier tests may be claimed too; this proposal's first click is the one.
    const claimed = (await jobStore.claimDue(at, 50, 60_000, { workerId: 'w_test', kinds: ['slack.click'] })).find(
      (job) => job.payload.proposalId === proposalId,
    );
    if (!claimed) throw new Error('the click was not claimed');
    return { store, job: claimed };
  }

  const statusOf = async (id: number) => (await database.db.select({ status: jobs.status }).from(jobs).where(eq(jobs.id, id)))[0]?.status;

  it('completes the job in the statement of the change, once it committed', async () => {
    const { store, job } = await claimedClick('prp_done');
    const { completed } = await store.transaction(async (tx) => {
      const locked = await tx.lockProposal('prp_done');
      tx.updateProposal(locked!, { status: 'rejected', decidedBy: 'slack:U0ALICE', decidedAt: at, updatedAt: at });
      // In an object: a promise the work returned would be awaited before the transaction could end.
      return { completed: tx.completeJob({ id: job.id, lockedBy: job.lockedBy }, at) };
    });
    expect(await completed).toEqual({ held: true, followed: false });
    expect(await statusOf(job.id)).toBe('done');
    expect((await store.getProposal('prp_done'))?.status).toBe('rejected');
  });

  it('says when a click of the same proposal waits behind it, as every completion does', async () => {
    const { store, job } = await claimedClick('prp_followed', 1);
    const { completed } = await store.transaction(async (tx) => {
      await tx.lockProposal('prp_followed');
      // In an object: a promise the work returned would be awaited before the transaction could end.
      return { completed: tx.completeJob({ id: job.id, lockedBy: job.lockedBy }, at) };
    });
    expect(await completed).toEqual({ held: true, followed: true });
  });

  it('leaves a job another worker holds now, and the change still commits', async () => {
    const { store, job } = await claimedClick('prp_reclaimed');
    const { completed } = await store.transaction(async (tx) => {
      const locked = await tx.lockProposal('prp_reclaimed');
      tx.updateProposal(locked!, { status: 'rejected', decidedBy: 'slack:U0ALICE', decidedAt: at, updatedAt: at });
      // In an object: a promise the work returned would be awaited before the transaction could end.
      return { completed: tx.completeJob({ id: job.id, lockedBy: 'w_other:1' }, at) };
    });
    expect(await completed).toEqual({ held: false, followed: false });
    expect(await statusOf(job.id)).toBe('running');
    expect((await store.getProposal('prp_reclaimed'))?.status).toBe('rejected');
  });

  it('completes nothing when the change fails, and its answer says so', async () => {
    const { store, job } = await claimedClick('prp_failed');
    let answer: Promise<unknown> | undefined;
    await expect(
      store.transaction(async (tx) => {
        const locked = await tx.lockProposal('prp_failed');
        tx.updateProposal(locked!, { status: 'rejected', decidedBy: 'slack:U0ALICE', decidedAt: at, updatedAt: at });
        // An approval of a person already counted: the database refuses the statement.
        tx.addApproval({ proposalId: 'prp_failed', approver: 'slack:U0ALICE', matchedRule: 'slack:U0ALICE', via: 'slack', at, stepUp: null });
        tx.addApproval({ proposalId: 'prp_failed', approver: 'slack:U0ALICE', matchedRule: 'slack:U0ALICE', via: 'slack', at, stepUp: null });
        answer = tx.completeJob({ id: job.id, lockedBy: job.lockedBy }, at);
      }),
    ).rejects.toThrow();
    await expect(answer).rejects.toThrow();
    expect(await statusOf(job.id)).toBe('running');
    expect((await store.getProposal('prp_failed'))?.status).toBe('pending');
  });

  it('is refused in a transaction that never began, which holds no lock', async () => {
    const { store, job } = await claimedClick('prp_unlocked');
    await expect(
      store.transaction(async (tx) => {
        void tx.completeJob({ id: job.id, lockedBy: job.lockedBy }, at);
      }),
    ).rejects.toThrow(/only by a transaction that began/);
    expect(await statusOf(job.id)).toBe('running');
  });
});
