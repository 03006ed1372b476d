import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ExecutionRequest, Executor } from '../../src/core/executor.js';
import { describeOnPostgres } from '../support/database.js';
import { configYaml, RULE_APPROVED_NOTE } from '../support/operations.js';
import { openBehindProxy } from '../support/tcp-proxy.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * A transaction begins only at its work's first statement, and a call a rule approves on an
 * in-process executor reads nothing before it runs the executor. The transaction that records the
 * run is still begun first: with the database out of reach, the side effect must not happen (its
 * record would surely be lost, and the agent's retry would run it a second time).
 */
describeOnPostgres('an in-process executor while the database cannot be reached', (driver) => {
  let behind: Awaited<ReturnType<typeof openBehindProxy>>;
  let twokey: TestTwokey;
  let apiKey: string;
  const runs: ExecutionRequest[] = [];
  const recording: Executor = {
    kind: 'local',
    async run(request) {
      runs.push(request);
      return { noted: true };
    },
  };

  beforeAll(async () => {
    behind = await openBehindProxy(driver);
    twokey = await startTestTwokey({
      driver,
      database: behind.database,
      configYaml: configYaml([RULE_APPROVED_NOTE]),
      executorFor: () => recording,
    });
    ({ apiKey } = await twokey.createAgent('noter'));
  });
  afterAll(async () => {
    await twokey?.close();
    await behind?.close();
  });

  const note = (text: string) => twokey.request('POST', '/v1/proposals', { apiKey, body: { operation: 'note', params: { text } } });

  it('does not run the executor, and runs it once when the database is back', async () => {
    // Warm: the agent's key is then served from memory, so nothing reaches the database before the decision.
    expect((await note('warm')).body).toMatchObject({ status: 'committed' });
    runs.length = 0;

    await behind.proxy.cut();
    const refused = await note('while cut');
    expect([refused.status, refused.body?.error?.code]).toEqual([503, 'database_unavailable']);
    expect(runs).toEqual([]);

    await behind.proxy.restore();
    const answered = await note('once back');
    expect(answered.body).toMatchObject({ status: 'committed' });
    expect(runs.map((run) => run.params)).toEqual([{ text: 'once back' }]);
  });
});
