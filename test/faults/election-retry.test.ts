import { describe, expect, it } from 'vitest';
import { nextElectionDelayMs } from '../../src/db/leader-election.js';

/**
 * The singleton work (sweeper, audit integrator, Discord gateway) resumes within one election
 * period of the database's return. Before, every failed tick doubled the wait up to a minute, so
 * after a 10 s outage the next try could come 16 s later, and after a minute-long one, a minute later.
 */
describe('when an election tries again', () => {
  it('at its normal pace while the database is down, however long that lasts', () => {
    expect(nextElectionDelayMs(2_000, 0)).toBe(2_000);
    expect(nextElectionDelayMs(100, 0)).toBe(100);
  });

  it('backing off, up to a minute, only when the elected work itself fails to start', () => {
    expect([1, 2, 3, 6, 12].map((failures) => nextElectionDelayMs(2_000, failures))).toEqual([4_000, 8_000, 16_000, 60_000, 60_000]);
  });
});
