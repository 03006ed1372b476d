import { eq } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutboxJobSpec } from '../../src/core/ports.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { jobs } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';

const sync = (key: string): OutboxJobSpec => ({
  kind: 'chat.sync',
  payload: { proposalId: key, platform: 'slack' },
  orderingKey: `chat:slack:${key}`,
  coalesce: true,
});

/**
 * A chat edit renders the proposal as it is when the edit runs, so a change made while an edit is
 * still waiting needs no edit of its own; one made after the edit started needs a new one.
 */
describe.each(drivers)('coalescing outbox jobs (%s)', (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  });
  afterAll(() => database.close());

  const enqueue = (specs: OutboxJobSpec[]) => createStore(database.db).transaction((tx) => tx.enqueue(specs, new Date()));
  const jobsOf = (key: string) =>
    database.db
      .select()
      .from(jobs)
      .where(eq(jobs.orderingKey, `chat:slack:${key}`))
      .orderBy(jobs.id);

  it('queues one job while an identical one waits, and a new one once it has started', async () => {
    await enqueue([sync('p1')]);
    await enqueue([sync('p1')]);
    await enqueue([
      sync('p1'),
      { kind: 'callback.deliver', payload: { proposalId: 'p1', status: 'committed', destination: 'agt_1 hooks.example' }, orderingKey: 'callback:p1' },
    ]);
    expect((await jobsOf('p1')).map((job) => job.status)).toEqual(['queued']);

    const [claimed] = await createJobStore(database.db).claimDue(new Date(Date.now() + 1_000), 10, 30_000);
    expect(claimed?.orderingKey).toBe('chat:slack:p1');
    await enqueue([sync('p1')]);
    expect((await jobsOf('p1')).map((job) => job.status)).toEqual(['running', 'queued']);
  });

  it('keeps jobs of other proposals and jobs that do not coalesce apart', async () => {
    await enqueue([sync('p2'), sync('p3')]);
    await enqueue([{ kind: 'chat.sync', payload: { proposalId: 'p2', platform: 'slack' }, orderingKey: 'chat:slack:p2' }]);
    expect(await jobsOf('p2')).toHaveLength(2);
    expect(await jobsOf('p3')).toHaveLength(1);
  });
});

describeOnPostgres('coalescing against a claim in flight', (driver) => {
  let database: Database & { url?: string };
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  });
  afterAll(() => database.close());

  it('waits for a worker that is claiming the waiting job, then queues a job of its own', async () => {
    const store = createStore(database.db);
    await store.transaction((tx) => tx.enqueue([sync('p4')], new Date()));
    const [waiting] = await database.db.select().from(jobs).where(eq(jobs.orderingKey, 'chat:slack:p4'));
    // A worker's claim, caught between locking the job and committing.
    const worker = postgres(database.url ?? '', { max: 1, onnotice: () => {} });
    const connection = await worker.reserve();
    await connection`begin`;
    await connection`update jobs set status = 'running' where id = ${waiting?.id ?? 0}`;

    const enqueued = store.transaction((tx) => tx.enqueue([sync('p4')], new Date()));
    const settled = Promise.race([enqueued.then(() => 'done'), new Promise((done) => setTimeout(() => done('still waiting'), 300))]);
    expect(await settled).toBe('still waiting');
    await connection`commit`;
    await enqueued;
    connection.release();
    await worker.end();
    const statuses = (await database.db.select().from(jobs).where(eq(jobs.orderingKey, 'chat:slack:p4')).orderBy(jobs.id)).map((job) => job.status);
    expect(statuses).toEqual(['running', 'queued']);
  });
});
