import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.js';
import { manualClock } from '../support/clock.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

describeOnPostgres('rate limits shared by replicas', (driver) => {
  const clock = manualClock();
  let base: Database & { url?: string };
  const pools: Database[] = [];
  const replicas: TestTwokey[] = [];
  let apiKey: string;

  beforeAll(async () => {
    base = await openTestDatabase(driver);
    for (let i = 0; i < 2; i += 1) {
      const database = await openDatabase({ databaseUrl: base.url ?? '', dataDir: '', poolSize: 5 });
      pools.push(database);
      replicas.push(await startTestTwokey({ driver, database, clock, rateLimit: { max: 100, timeWindowMs: 60_000 } }));
    }
    ({ apiKey } = await replicas[0]!.createAgent('limited'));
  }, 120_000);
  afterAll(async () => {
    for (const replica of replicas) await replica.close();
    for (const pool of pools) await pool.close();
    await base.close();
  });

  const statusesOf = async (count: number) => {
    const statuses: number[] = [];
    // Alternating replicas, as a round-robin load balancer sends one agent's requests.
    for (let i = 0; i < count; i += 1) statuses.push((await replicas[i % 2]!.request('GET', '/v1/operations', { apiKey })).status);
    return statuses;
  };

  it('two replicas together allow the documented rate per key, not twice it; the next window allows it again', async () => {
    const first = await statusesOf(140);
    expect(first.filter((status) => status === 200)).toHaveLength(100);
    expect(first.filter((status) => status === 429)).toHaveLength(40);
    clock.advance(60_000);
    const next = await statusesOf(10);
    expect(next.every((status) => status === 200)).toBe(true);
  });
});
