import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openRecordedDatabase, SqlRecorder, type RecordedStatement } from '../../bench/support/sql-trace.js';
import { sleep } from '../../bench/support/stats.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';

/**
 * twokey at rest on the embedded database. Every job it queues and every proposal it changes wakes
 * the outbox worker and the audit integrator in this process, so their polls are only fallbacks,
 * every 2 s as on PostgreSQL. They once polled every 250 ms: a transaction of WASM PostgreSQL several
 * times a second, most of twokey's CPU while nothing happened. The window below is counted, not
 * timed: a slow machine makes fewer polls, never more.
 */
describe('the embedded database at rest', () => {
  const recorder = new SqlRecorder();
  let twokey: TestTwokey;

  beforeAll(async () => {
    const database = await openRecordedDatabase(undefined, recorder);
    // The poll paces are the defaults; only the sweeper (its own 1 s timer) is kept out of the count.
    twokey = await startTestTwokey({ driver: 'pglite', database, sweepIntervalMs: 600_000 });
  }, 120_000);
  afterAll(() => twokey?.close());

  /** Each pass of the integrator starts by asking whether any audit row waits for its place. */
  const integratorPasses = (texts: string[]) => texts.filter((text) => /from "audit_events" where "audit_events"\."seq" is null limit/.test(text)).length;
  /** The outbox's claims, by lane: a lane is known by the job kinds it claims (`chat.sync`, …), among the claim's parameters. */
  function outboxClaimsByLane(statements: RecordedStatement[]): number[] {
    const byLane = new Map<string, number>();
    for (const { text, params } of statements) {
      if (!/^\s*update jobs set status = 'running'/.test(text)) continue;
      const lane = params.filter((param) => typeof param === 'string' && /^[a-z]+\.[a-z]+$/.test(param)).join(',');
      byLane.set(lane, (byLane.get(lane) ?? 0) + 1);
    }
    return [...byLane.values()];
  }

  it('polls for audit rows and jobs every 2 s, not every 250 ms', async () => {
    const { statements } = await recorder.during(() => sleep(1_500));
    // At most one pass of each fallback poll fits in 1.5 s; at 250 ms there were five or six.
    expect(integratorPasses(statements.map((statement) => statement.text))).toBeLessThanOrEqual(1);
    const claims = outboxClaimsByLane(statements);
    expect(
      claims.every((count) => count <= 1),
      `claims per lane: ${claims.join(', ')}`,
    ).toBe(true);
  });

  it('wakes the integrator on a change, so its audit rows are in the chain without waiting for the poll', async () => {
    const wake = vi.spyOn(twokey.audit, 'wake');
    const { apiKey } = await twokey.createAgent('resting');
    const agent = await twokey.services.agents.authenticate(apiKey);
    const { proposal } = await twokey.services.proposals.propose(agent, { operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } });
    expect(wake).toHaveBeenCalled();
    const chained = async () => (await twokey.services.store.listAudit({ proposalId: proposal.id, limit: 10 })).every((event) => event.seq !== null);
    // The wake looks 250 ms after the change; the fallback poll could take 2 s.
    await vi.waitFor(async () => expect(await chained()).toBe(true), { timeout: 10_000, interval: 50 });
    wake.mockRestore();
  });
});
