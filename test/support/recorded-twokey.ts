import { openRecordedDatabase, type SqlRecorder } from '../../bench/support/sql-trace.js';
import { manualClock } from './clock.js';
import { openTestDatabase, type Driver } from './database.js';
import { startTestTwokey, type TestTwokeyOptions } from './twokey.js';

/**
 * A twokey whose every statement `recorder` sees, on a database of its own, doing only the
 * requests' own work: no outbox poll, sweep or audit integration meanwhile. `close` ends it all.
 */
export async function startRecordedTwokey(driver: Driver, recorder: SqlRecorder, options: Pick<TestTwokeyOptions, 'executorFor'> = {}) {
  const scratch = driver === 'postgres' ? await openTestDatabase('postgres', { poolSize: 1 }) : null;
  const recorded = await openRecordedDatabase(scratch?.url, recorder);
  const twokey = await startTestTwokey({
    driver,
    database: recorded,
    clock: manualClock(),
    ...options,
    outboxPollMs: 600_000,
    sweepIntervalMs: 600_000,
    auditIntervalMs: 3_600_000,
  });
  return {
    twokey,
    async close() {
      await twokey.close();
      await recorded.close();
      await scratch?.close();
    },
  };
}

export type RecordedTwokey = Awaited<ReturnType<typeof startRecordedTwokey>>;
