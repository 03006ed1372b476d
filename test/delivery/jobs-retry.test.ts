import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runAdminOperation } from '../../src/admin/operations.js';
import { parseConfig } from '../../src/config/config-file.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { createServices } from '../../src/runtime/services.js';
import { describeOnPostgres, drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, testConfigYaml, type TestTwokey } from '../support/twokey.js';

/** A callback receiver that refuses (503) until switched up, and counts what it accepted. */
async function startReceiver() {
  let up = false;
  let accepted = 0;
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      if (!up) return void response.writeHead(503).end();
      accepted += 1;
      response.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    setUp: (value: boolean) => (up = value),
    accepted: () => accepted,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

// The outbox's poll comes every ten minutes here: a job that runs within the test was woken.
const POLL_NEVER_MS = 600_000;

/** A proposal with a callback, cancelled while its receiver refuses, until the callback job is dead. */
async function deadCallback(twokey: TestTwokey, receiver: Awaited<ReturnType<typeof startReceiver>>, agent: string) {
  const { apiKey } = await twokey.createAgent(agent);
  const proposed = await twokey.request('POST', '/v1/proposals', {
    apiKey,
    body: { operation: 'delete_workspace', params: { workspace: agent }, callbackUrl: receiver.url },
  });
  expect(proposed.status).toBe(201);
  await twokey.request('POST', `/v1/proposals/${proposed.body.id}/cancel`, { apiKey });
  let deadId = 0;
  await vi.waitFor(
    async () => {
      const dead = (await twokey.services.jobs.list({ status: 'dead' })).find((job) => job.payload.proposalId === proposed.body.id);
      expect(dead).toBeDefined();
      deadId = dead?.id ?? 0;
    },
    { timeout: 20_000, interval: 50 },
  );
  return deadId;
}

describe.each(drivers)('twokey jobs retry runs the job at once (%s)', (driver) => {
  let twokey: TestTwokey;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    // Failed attempts wake their lane when they fall due, so the job dies within the test without a poll.
    twokey = await startTestTwokey({ driver, outboxPollMs: POLL_NEVER_MS, outboxBackoff: { baseMs: 1, maxMs: 5 } });
  });
  afterAll(async () => {
    await twokey?.close();
    await receiver?.close();
  });

  it('a dead callback queued again by the operator is delivered without waiting for a poll', async () => {
    const deadId = await deadCallback(twokey, receiver, 'retried-here');
    receiver.setUp(true);
    const answer = await runAdminOperation(twokey.services, 'jobs.retry', { id: String(deadId) });
    expect(answer).toMatchObject({ id: deadId, kind: 'callback.deliver', status: 'queued' });
    await vi.waitFor(() => expect(receiver.accepted()).toBe(1), { timeout: 5_000, interval: 20 });
    await vi.waitFor(async () => expect((await twokey.services.jobs.list({ status: 'done' })).some((job) => job.id === deadId)).toBe(true), {
      timeout: 5_000,
    });
  });
});

describeOnPostgres('twokey jobs retry from another process wakes the serving replica (postgres)', () => {
  let shared: Database & { url?: string };
  let serving: Database;
  let twokey: TestTwokey;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    shared = await openTestDatabase('postgres');
    // Its own pool and notifier, as a separate process has.
    serving = await openDatabase({ databaseUrl: shared.url, dataDir: '', poolSize: 4 });
    twokey = await startTestTwokey({ driver: 'postgres', database: serving, outboxPollMs: POLL_NEVER_MS, outboxBackoff: { baseMs: 1, maxMs: 5 } });
  }, 60_000);
  afterAll(async () => {
    await twokey?.close();
    await serving?.close();
    await shared?.close();
    await receiver?.close();
  });

  it('as `twokey jobs retry` does on PostgreSQL: its own services, then gone', async () => {
    const deadId = await deadCallback(twokey, receiver, 'retried-elsewhere');
    receiver.setUp(true);
    // What src/cli/in-process.ts does when no server holds the data on this machine.
    const cli = await openDatabase({ databaseUrl: shared.url, dataDir: '', poolSize: 2 });
    try {
      const services = createServices({ database: cli, config: parseConfig(testConfigYaml, {}, 'test.yaml') });
      await runAdminOperation(services, 'jobs.retry', { id: String(deadId) });
    } finally {
      await cli.close();
    }
    await vi.waitFor(() => expect(receiver.accepted()).toBe(1), { timeout: 5_000, interval: 20 });
  });
});
