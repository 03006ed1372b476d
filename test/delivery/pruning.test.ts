import { Writable } from 'node:stream';
import { eq, inArray } from 'drizzle-orm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { agpTokens, approverLinks, consoleSessions, idempotencyKeys, jobs, rateLimitWindows } from '../../src/db/schema.js';
import { createSweeper } from '../../src/runtime/sweeper.js';
import { manualClock } from '../support/clock.js';
import { describeOnPostgres, drivers } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

describe.each(drivers)('pruning on a schedule (%s)', (driver) => {
  const clock = manualClock(new Date('2026-11-23T10:00:00Z'));
  let twokey: TestTwokey;
  let agentId: string;

  beforeAll(async () => {
    // Sweeps run only when the test calls them.
    twokey = await startTestTwokey({ driver, clock, pruneIntervalMs: 10 * MINUTE, sweepIntervalMs: 3_600_000 });
    ({ id: agentId } = await twokey.createAgent('pruned'));
  }, 180_000);
  afterAll(() => twokey.close());

  const db = () => twokey.services.database.db;

  /** One row of every kind that expires, named `tag`, expiring (or finished) at `at`. */
  async function seed(tag: string, at: Date) {
    const created = new Date(at.getTime() - DAY);
    await db()
      .insert(approverLinks)
      .values({ tokenHash: `link-${tag}`, approver: 'web:alice', createdAt: created, expiresAt: at, usedAt: null });
    await db()
      .insert(consoleSessions)
      .values({ idHash: `session-${tag}`, approver: 'web:alice', createdAt: created, expiresAt: at, revokedAt: null });
    await db()
      .insert(idempotencyKeys)
      .values({ agentId, key: `key-${tag}`, requestHash: 'h', status: 'done', responseStatus: 200, responseBody: {}, createdAt: created, expiresAt: at });
    await db()
      .insert(agpTokens)
      .values({
        tokenHash: `agp-${tag}`,
        kind: 'gateway',
        agentId,
        businessId: 'echo',
        requestHash: 'h',
        createdAt: created,
        expiresAt: new Date(at.getTime() - DAY),
      });
    await db()
      .insert(jobs)
      .values({
        kind: `test.${tag}`,
        payload: {},
        status: 'done',
        maxAttempts: 1,
        runAt: created,
        createdAt: created,
        updatedAt: new Date(at.getTime() - DAY),
      });
  }
  async function remaining(tag: string): Promise<string[]> {
    const left: string[] = [];
    if (
      (
        await db()
          .select()
          .from(approverLinks)
          .where(inArray(approverLinks.tokenHash, [`link-${tag}`]))
      ).length
    )
      left.push('link');
    if (
      (
        await db()
          .select()
          .from(consoleSessions)
          .where(inArray(consoleSessions.idHash, [`session-${tag}`]))
      ).length
    )
      left.push('session');
    if (
      (
        await db()
          .select()
          .from(idempotencyKeys)
          .where(inArray(idempotencyKeys.key, [`key-${tag}`]))
      ).length
    )
      left.push('idempotency');
    if (
      (
        await db()
          .select()
          .from(agpTokens)
          .where(inArray(agpTokens.tokenHash, [`agp-${tag}`]))
      ).length
    )
      left.push('agp token');
    if (
      (
        await db()
          .select()
          .from(jobs)
          .where(inArray(jobs.kind, [`test.${tag}`]))
      ).length
    )
      left.push('done job');
    return left;
  }
  /** One sweep by the elected sweeper (the embedded database's one process leads at once). */
  async function sweep() {
    await vi.waitFor(async () => expect(await twokey.sweeper.tick()).toBe(true));
  }

  it('deletes what has expired and keeps what has not', async () => {
    await seed('old', new Date(clock().getTime() - MINUTE));
    await seed('fresh', new Date(clock().getTime() + 5 * MINUTE));
    await sweep();
    expect(await remaining('old')).toEqual([]);
    expect(await remaining('fresh')).toEqual(['link', 'session', 'idempotency', 'agp token', 'done job']);
  }, 120_000);

  it('runs on its schedule by the clock, not on every sweep', async () => {
    // 'fresh' expires at +5 min; the last prune ran at +0.
    clock.advance(6 * MINUTE);
    await sweep();
    expect(await remaining('fresh')).toHaveLength(5);
    clock.advance(5 * MINUTE);
    await sweep();
    expect(await remaining('fresh')).toEqual([]);
  }, 120_000);

  it('deletes in bounded batches and comes back for the rest at the next sweep', async () => {
    const now = clock();
    const rows = Array.from({ length: 620 }, (_, i) => ({
      agentId,
      key: `bulk-${i}`,
      requestHash: 'h',
      status: 'done',
      responseStatus: 200,
      responseBody: {},
      createdAt: new Date(now.getTime() - DAY),
      expiresAt: new Date(now.getTime() - MINUTE),
    }));
    await db().insert(idempotencyKeys).values(rows);
    clock.advance(10 * MINUTE);
    await sweep();
    const bulk = async () => (await db().select().from(idempotencyKeys)).filter((row) => row.key.startsWith('bulk-')).length;
    expect(await bulk()).toBe(120);
    // Not due by the schedule, but the last batch came back full.
    await sweep();
    expect(await bulk()).toBe(0);
  }, 120_000);
});

// The shared rate-limit counters are PostgreSQL's (replicas share them); the embedded database keeps them in memory.
describeOnPostgres('rate-limit windows', (driver) => {
  const clock = manualClock(new Date('2026-11-23T10:00:00Z'));
  let twokey: TestTwokey;

  beforeAll(async () => {
    twokey = await startTestTwokey({ driver, clock, pruneIntervalMs: 10 * MINUTE, sweepIntervalMs: 3_600_000 });
  }, 180_000);
  afterAll(() => twokey.close());

  it('a day old, are forgotten on the pruning schedule, not on every sweep (once a second)', async () => {
    const db = twokey.services.database.db;
    const sweep = () => vi.waitFor(async () => expect(await twokey.sweeper.tick()).toBe(true));
    const kept = async (key: string) => (await db.select().from(rateLimitWindows).where(eq(rateLimitWindows.key, key))).length;
    const dayOld = (key: string) => db.insert(rateLimitWindows).values({ key, windowStart: clock().getTime() - 2 * DAY, taken: 3 });
    await dayOld('agent-a');
    await sweep();
    expect(await kept('agent-a')).toBe(0);
    // The prune just ran: a sweep within its interval leaves a window that went old meanwhile.
    await dayOld('agent-b');
    clock.advance(MINUTE);
    await sweep();
    expect(await kept('agent-b')).toBe(1);
    clock.advance(10 * MINUTE);
    await sweep();
    expect(await kept('agent-b')).toBe(0);
  }, 120_000);
});

describe('sweeper failures', () => {
  it('are logged with the task that failed, and the other tasks still run', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) }));
    let expired = 0;
    const sweeper = createSweeper({
      clock: () => new Date('2026-11-23T10:00:00Z'),
      logger,
      isLeader: () => true,
      tasks: {
        expiry: async () => {
          expired += 1;
        },
        'execution recovery': () => Promise.reject(new Error('connection terminated')),
      },
      prune: () => Promise.reject(new Error('relation "jobs" is locked')),
      pruneBatchSize: 500,
      pruneEveryMs: 1,
    });
    expect(await sweeper.tick()).toBe(true);
    expect(expired).toBe(1);
    const errors = lines
      .map((line) => JSON.parse(line) as { level: number; task: string; msg: string; err: { message: string } })
      .filter((line) => line.level === 50);
    expect(errors.map((line) => [line.task, line.err.message])).toEqual([
      ['execution recovery', 'connection terminated'],
      ['prune', 'relation "jobs" is locked'],
    ]);
  }, 120_000);
});
