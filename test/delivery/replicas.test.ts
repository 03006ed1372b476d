import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.js';
import { describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';
import { seededRandom, shuffled } from '../support/random.js';
import { startFakeDownstream, type FakeDownstream } from '../support/fake-downstream.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const SECRET = 'replica-downstream-secret-42';
const config = (url: string) => `
operations:
  - name: send_mailing
    description: Send a mailing
    params:
      type: object
      required: [list]
      properties:
        list: { type: string }
    summary: "{{agent}} wants to mail {{params.list}}."
    approval: { approvers: [web:alice, web:bob], quorum: 1 }
    executor: { type: http, url: "${url}/send", secret: "${SECRET}", timeout: 30s }
  - name: upgrade_plan
    description: Change a plan
    params:
      type: object
      required: [org]
      properties:
        org: { type: string }
    summary: "{{agent}} upgrades {{params.org}}."
    approval: { approvers: [web:alice], quorum: 1 }
    commit: agent
    executor: { type: echo }
`;

describe.each(drivers)('replicas on one database (%s)', (driver) => {
  const REPLICAS = driver === 'postgres' ? 3 : 2;
  let downstream: FakeDownstream;
  let shared: Database & { url?: string };
  const databases: Database[] = [];
  const replicas: TestTwokey[] = [];
  let apiKey: string;

  beforeAll(async () => {
    downstream = await startFakeDownstream(SECRET);
    shared = await openTestDatabase(driver);
    for (let i = 0; i < REPLICAS; i += 1) {
      // On PostgreSQL each replica has its own pool, as separate processes would; PGlite is one process.
      const database = shared.url ? await openDatabase({ databaseUrl: shared.url, dataDir: '', poolSize: 10 }) : shared;
      if (database !== shared) databases.push(database);
      // One agent keeps 200 proposals pending at once here, above the default cap of 100.
      replicas.push(
        await startTestTwokey({
          driver,
          database,
          configYaml: config(downstream.url),
          outboxPollMs: 50,
          // On PostgreSQL a long-poll is woken by NOTIFY alone: its fallback re-read never comes within a test.
          longPollIntervalMs: driver === 'postgres' ? 600_000 : undefined,
          env: { TWOKEY_MAX_PENDING_PER_AGENT: '1000' },
        }),
      );
    }
    ({ apiKey } = await replicas[0]!.createAgent('fleet'));
  }, 120_000);
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    for (const database of databases) await database.close();
    await shared.close();
    await downstream.close();
  });

  const random = seededRandom();
  const pick = () => replicas[Math.floor(random() * replicas.length)]!;

  // The embedded database runs every replica's statements on one thread: fewer proposals keep it in time on a loaded machine.
  const PROPOSALS = driver === 'postgres' ? 200 : 100;

  it(`${PROPOSALS} proposals, approvals sent to random replicas with duplicates: each executed exactly once`, async () => {
    const ids: string[] = [];
    for (let i = 0; i < PROPOSALS; i += 1) {
      const proposed = await pick().request('POST', '/v1/proposals', { apiKey, body: { operation: 'send_mailing', params: { list: `list-${i}` } } });
      expect(proposed.status).toBe(201);
      ids.push(proposed.body.id);
    }
    const clicks = shuffled(
      ids.flatMap((id) => [
        { id, identity: 'web:alice' },
        { id, identity: 'web:alice' },
        { id, identity: 'web:bob' },
      ]),
      random,
    );
    const refusals: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        for (let i = next++; i < clicks.length; i = next++) {
          const click = clicks[i]!;
          await pick()
            .services.proposals.approve(click.id, { identity: click.identity, via: 'test' })
            .catch((error: { code?: string }) => refusals.push(error.code ?? 'unknown'));
        }
      }),
    );
    // Only "already decided" refusals: bob (or alice) arriving after the quorum.
    expect(new Set(refusals)).toEqual(new Set(refusals.length ? ['not_pending'] : []));
    await vi.waitFor(
      async () => {
        const all = await replicas[0]!.services.store.listProposals({ operation: 'send_mailing', limit: 1000 });
        const unfinished = all.filter((p) => p.status !== 'committed').map((p) => `${p.id}:${p.status}:${p.error ?? ''}`);
        expect(unfinished).toEqual([]);
      },
      { timeout: 240_000, interval: 250 },
    );
    for (const id of ids) expect(downstream.effects.get(id)?.count, id).toBe(1);
    expect(downstream.requests.filter((r) => ids.includes(r.idempotencyKey ?? '')).length).toBe(PROPOSALS);
  }, 300_000);

  it(
    driver === 'postgres'
      ? 'a long-poll on one replica is woken by a decision on another (LISTEN/NOTIFY, no re-read to fall back on)'
      : 'a long-poll sees a decision made through another service instance (polling)',
    async () => {
      const [waiter, decider] = [replicas[0]!, replicas[replicas.length - 1]!];
      const waits = vi.spyOn(waiter.services.changes, 'next');
      try {
        for (let round = 0; round < 3; round += 1) {
          const proposed = await waiter.request('POST', '/v1/proposals', { apiKey, body: { operation: 'upgrade_plan', params: { org: `o${round}` } } });
          waits.mockClear();
          const polled = waiter.request('GET', `/v1/proposals/${proposed.body.id}?wait=60`, { apiKey });
          await vi.waitFor(() => expect(waits).toHaveBeenCalled(), { timeout: 20_000, interval: 10 });
          await decider.services.proposals.approve(proposed.body.id, { identity: 'web:alice', via: 'test' });
          expect((await polled).body.status).toBe('approved');
          if (driver === 'postgres') {
            // Woken by the other replica's NOTIFY, not by its wait running out (no re-read interval within the test).
            const outcomes = await Promise.all(waits.mock.results.map((result) => result.value as Promise<boolean>));
            expect(outcomes).toContain(true);
          }
        }
      } finally {
        waits.mockRestore();
      }
    },
    240_000,
  );
});

describeOnPostgres('database outage', (driver) => {
  it('/readyz turns not-ready while PostgreSQL is unreachable and ready after; no proposal or job is lost', async () => {
    const { startTcpProxy } = await import('../support/tcp-proxy.js');
    const { createServer } = await import('node:http');
    const base = await openTestDatabase(driver);
    const target = new URL(base.url ?? '');
    const proxy = await startTcpProxy(Number(target.port || 5432), target.hostname);
    const viaProxy = new URL(base.url ?? '');
    viaProxy.port = String(proxy.port);
    // The receiver holds the first delivery until the database is gone, so the worker cannot record
    // it then; the job must end done after the outage: recorded once the database is back, or, when
    // the outage outlasts its lease, delivered again (at least once, same delivery id).
    const callbacks: Array<{ body: string; delivery: string }> = [];
    const receiver = createServer();
    let releaseFirst: (() => void) | null = null;
    const firstArrived = new Promise<void>((arrived) => {
      const receiverHandler = (req: IncomingMessage, res: ServerResponse) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          callbacks.push({ body: Buffer.concat(chunks).toString(), delivery: String(req.headers['x-twokey-delivery']) });
          if (callbacks.length === 1) {
            releaseFirst = () => res.writeHead(204).end();
            arrived();
          } else res.writeHead(204).end();
        });
      };
      receiver.on('request', receiverHandler);
    });
    receiver.listen(0, '127.0.0.1');
    await new Promise((done) => receiver.once('listening', done));
    const receiverAddress = receiver.address();
    const callbackUrl = `http://127.0.0.1:${typeof receiverAddress === 'object' && receiverAddress ? receiverAddress.port : 0}/cb`;

    const database = await openDatabase({ databaseUrl: viaProxy.toString(), dataDir: '', poolSize: 4 });
    const twokey = await startTestTwokey({ driver, database, outboxPollMs: 50, outboxLeaseMs: 2_000, outboxBackoff: { baseMs: 200, maxMs: 500 } });
    try {
      const { apiKey } = await twokey.createAgent('steady');
      const proposed = await twokey.request('POST', '/v1/proposals', {
        apiKey,
        body: { operation: 'delete_workspace', params: { workspace: 'w' }, callbackUrl },
      });
      await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
      expect((await twokey.request('GET', '/readyz')).status).toBe(200);
      await firstArrived;

      await proxy.cut();
      (releaseFirst as (() => void) | null)?.();
      await vi.waitFor(async () => expect((await twokey.request('GET', '/readyz')).status).toBe(503), { timeout: 15_000 });
      const duringOutage = await twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'delete_workspace', params: { workspace: 'x' } } });
      expect(duringOutage.status).toBeGreaterThanOrEqual(500);
      expect(JSON.stringify(duringOutage.body)).not.toContain('postgres://');

      await proxy.restore();
      await vi.waitFor(async () => expect((await twokey.request('GET', '/readyz')).status).toBe(200), { timeout: 20_000 });
      const after = await twokey.request('GET', `/v1/proposals/${proposed.body.id}`, { apiKey });
      expect(after.body.status).toBe('cancelled');
      await vi.waitFor(
        async () => {
          const [job] = (await twokey.services.jobs.list({})).filter((j) => j.payload.proposalId === proposed.body.id);
          expect(job?.status).toBe('done');
        },
        { timeout: 20_000 },
      );
      expect(callbacks.length).toBeGreaterThanOrEqual(1);
      expect(new Set(callbacks.map((c) => c.delivery))).toEqual(new Set([`${proposed.body.id}:cancelled`]));
      expect(JSON.parse(callbacks.at(-1)?.body ?? '{}')).toMatchObject({ event: 'proposal.cancelled', proposal: { id: proposed.body.id } });
    } finally {
      await twokey.close();
      await database.close();
      await proxy.close();
      receiver.close();
      await base.close();
    }
  }, 90_000);
});

describeOnPostgres('singleton election', (driver) => {
  it('one replica leads; when its session dies another takes over', async () => {
    const { createLeaderElection } = await import('../../src/db/leader-election.js');
    const { pino } = await import('pino');
    const base = await openTestDatabase(driver);
    const clients = await Promise.all([0, 1].map(() => openDatabase({ databaseUrl: base.url ?? '', dataDir: '', poolSize: 3 })));
    const logger = pino({ level: 'silent' });
    const key = 4242;
    const singletons = clients.map((database, i) =>
      createLeaderElection({ databaseUrl: database.url, key, log: () => logger, name: `test-${i}`, retryMs: 100 }),
    );
    try {
      singletons.forEach((singleton) => singleton.start());
      await vi.waitFor(() => expect(singletons.filter((s) => s.isLeader())).toHaveLength(1), { timeout: 5_000 });
      await new Promise((done) => setTimeout(done, 300));
      expect(singletons.filter((s) => s.isLeader())).toHaveLength(1);
      const leaderIndex = singletons.findIndex((s) => s.isLeader());
      // Kill the leader's session from outside, as a crashed process would lose it.
      await clients[1 - leaderIndex]!.client!`select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and objid = ${key} and granted`;
      await vi.waitFor(() => expect(singletons[1 - leaderIndex]!.isLeader()).toBe(true), { timeout: 5_000 });
      await vi.waitFor(() => expect(singletons[leaderIndex]!.isLeader()).toBe(false), { timeout: 5_000 });
    } finally {
      for (const singleton of singletons) await singleton.stop();
      for (const client of clients) await client.close();
      await base.close();
    }
  });
});
