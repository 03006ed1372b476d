import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { OutboxJobSpec } from '../../src/core/ports.js';
import type { Database } from '../../src/db/database.js';
import { createJobStore } from '../../src/db/jobs-store.js';
import { jobs } from '../../src/db/schema.js';
import { createStore } from '../../src/db/store.js';
import { defaultLanes } from '../../src/outbox/worker.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const callback = (agentId: string, host: string, n: number): OutboxJobSpec => ({
  kind: 'callback.deliver',
  payload: { proposalId: `${agentId}-${n}`, status: 'cancelled', agentId, destination: `${agentId} ${host}` },
  orderingKey: `callback:${agentId}-${n}`,
});

/** The claim itself: caps per agent and per agent-and-host, applied before the candidate window is cut. */
describe.each(drivers)('claiming callbacks per agent (%s)', (driver) => {
  let database: Database;
  beforeAll(async () => {
    database = await openTestDatabase(driver);
  });
  afterAll(() => database.close());

  const enqueue = (specs: OutboxJobSpec[], at: Date) => createStore(database.db).transaction((tx) => tx.enqueue(specs, at));

  it("an agent's backlog of 400 due callbacks to one host does not hide another agent's callback to that host", async () => {
    const earlier = new Date(Date.now() - 60_000);
    await enqueue(
      Array.from({ length: 400 }, (_, n) => callback('agt_noisy', 'hooks.example:443', n)),
      earlier,
    );
    await enqueue([callback('agt_quiet', 'hooks.example:443', 0)], new Date(Date.now() - 1_000));
    // The default callbacks lane: 16 slots, 4 per agent, 2 per agent and host.
    expect(defaultLanes().find((lane) => lane.name === 'callbacks')).toMatchObject({ concurrency: 16, perAgent: 4, perDestination: 2 });
    const claimed = await createJobStore(database.db).claimDue(new Date(), 16, 60_000, {
      kinds: ['callback.deliver'],
      perDestination: 2,
      perAgent: 4,
      running: new Map(),
      runningByAgent: new Map(),
    });
    const byAgent = (agentId: string) => claimed.filter((job) => job.payload.agentId === agentId).length;
    // Two for the noisy agent's one host (half its cap), and the quiet agent's callback in the same claim.
    expect([byAgent('agt_noisy'), byAgent('agt_quiet')]).toEqual([2, 1]);
    await database.db.delete(jobs).where(eq(jobs.kind, 'callback.deliver'));
  });

  it('holds an agent to its cap across hosts, counting what this worker already runs', async () => {
    const at = new Date(Date.now() - 1_000);
    await enqueue(
      ['a.example', 'b.example', 'c.example'].flatMap((host, h) => [0, 1, 2].map((n) => callback('agt_many', host, h * 10 + n))),
      at,
    );
    const store = createJobStore(database.db);
    const claim = (running: Map<string, number>, runningByAgent: Map<string, number>) =>
      store.claimDue(new Date(), 16, 60_000, { kinds: ['callback.deliver'], perDestination: 2, perAgent: 4, running, runningByAgent });
    const first = await claim(new Map(), new Map());
    expect(first).toHaveLength(4);
    // Two already run towards a.example and the agent holds 4: nothing more until one settles.
    expect(await claim(new Map([['agt_many a.example', 2]]), new Map([['agt_many', 4]]))).toEqual([]);
    // One settled: one more, never a third towards a host that already has two.
    const next = await claim(new Map([['agt_many a.example', 2]]), new Map([['agt_many', 3]]));
    expect(next).toHaveLength(1);
    expect(next[0]?.payload.destination).not.toBe('agt_many a.example');
    await database.db.delete(jobs).where(eq(jobs.kind, 'callback.deliver'));
  });
});

/** One receiver host: `/hang/…` reads each request and never answers, `/ok/…` answers 204. */
async function startSharedReceiver() {
  const hanging = new Set<ServerResponse>();
  let answered = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    if (req.url?.startsWith('/hang/')) {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    req.on('end', () => {
      answered += 1;
      res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  return {
    base: `http://127.0.0.1:${address.port}`,
    hanging: () => hanging.size,
    answered: () => answered,
    async close() {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
}

describe.each(drivers)('callback lanes per agent and host (%s)', (driver) => {
  let twokey: TestTwokey;
  let receiver: Awaited<ReturnType<typeof startSharedReceiver>>;

  beforeAll(async () => {
    receiver = await startSharedReceiver();
    twokey = await startTestTwokey({
      driver,
      // Far longer than any test waits: "delivered before any hanging attempt ended" cannot be won by timing.
      callbackTimeoutMs: 600_000,
      outboxHandlerDeadlineMs: 600_000,
      outboxLeaseMs: 1_200_000,
      outboxPollMs: 50,
    });
  }, 120_000);
  afterAll(async () => {
    // Hung-up requests fail at once, so shutdown does not wait for the callback timeout.
    await receiver.close();
    await twokey.close();
  }, 120_000);

  const proposeAndCancel = async (apiKey: string, workspace: string, callbackUrl: string) => {
    const proposed = await twokey.request('POST', '/v1/proposals', {
      apiKey,
      body: { operation: 'delete_workspace', params: { workspace }, callbackUrl },
    });
    expect(proposed.status).toBe(201);
    expect((await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey })).status).toBe(200);
    return proposed.body.id as string;
  };

  /** Callback attempts that have ended (answered, failed or timed out) leave their mark on the job. */
  const endedAttempts = async (agentId: string) =>
    (await twokey.services.database.db.select().from(jobs).where(eq(jobs.kind, 'callback.deliver'))).filter(
      (job) => job.payload.agentId === agentId && (job.lastError !== null || (job.status !== 'running' && job.attempts > 0)),
    ).length;

  it("one agent's 80 hanging callbacks do not hold back another agent's callback to the same host", async () => {
    const hostile = await twokey.createAgent('hangs');
    const neighbour = await twokey.createAgent('answers');
    for (let n = 0; n < 80; n += 1) await proposeAndCancel(hostile.apiKey, `hang-${n}`, `${receiver.base}/hang/${n}`);
    await vi.waitFor(() => expect(receiver.hanging()).toBe(2), { timeout: 60_000, interval: 20 });

    await proposeAndCancel(neighbour.apiKey, 'answered', `${receiver.base}/ok/1`);
    await vi.waitFor(() => expect(receiver.answered()).toBe(1), { timeout: 60_000, interval: 20 });
    // Delivered while every hostile attempt that started still hangs, and the hostile agent never
    // held more than its share towards that host (2: half its default cap of 4).
    expect(await endedAttempts(hostile.id)).toBe(0);
    expect(receiver.hanging()).toBe(2);
    // The receiver has answered; the job's completion is written just after (completions are batched).
    await vi.waitFor(
      async () => {
        const [delivered] = (await twokey.services.database.db.select().from(jobs).where(eq(jobs.kind, 'callback.deliver'))).filter(
          (job) => job.payload.agentId === neighbour.id,
        );
        expect(delivered).toMatchObject({ status: 'done', attempts: 1 });
      },
      { timeout: 10_000, interval: 20 },
    );

    // More than its cap, one after another: each settled callback gives its slot back.
    for (let n = 2; n <= 7; n += 1) await proposeAndCancel(neighbour.apiKey, `answered-${n}`, `${receiver.base}/ok/${n}`);
    await vi.waitFor(() => expect(receiver.answered()).toBe(7), { timeout: 60_000, interval: 20 });
    expect(await endedAttempts(hostile.id)).toBe(0);
  }, 180_000);
});
