import { describe, expect, it } from 'vitest';
import { reconnectDelaySeconds } from '../../src/db/database.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';

describe('reconnect delay after a database outage', () => {
  it('never exceeds 2 s, however many attempts failed, and starts small', () => {
    const delays = Array.from({ length: 60 }, (_, failedAttempts) => reconnectDelaySeconds(failedAttempts));
    expect(Math.max(...delays)).toBeLessThanOrEqual(2);
    expect(reconnectDelaySeconds(0)).toBeLessThanOrEqual(0.05);
    // Jittered: a fleet of replicas that lost the database together does not come back in step.
    expect(new Set(Array.from({ length: 20 }, () => reconnectDelaySeconds(8))).size).toBeGreaterThan(1);
  });
});

describeOnPostgres('the pool', () => {
  it('reconnects with that delay, not postgres.js’s own (which grows to 20 s)', async () => {
    // A database of its own: migrating the server's default database would leave tables behind there.
    const database = await openTestDatabase('postgres', { poolSize: 1 });
    try {
      expect(database.client?.options.backoff).toBe(reconnectDelaySeconds);
    } finally {
      await database.close();
    }
  });
});
