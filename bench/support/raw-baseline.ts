/**
 * Records the SQL of one full cycle through an in-process twokey (same code as `twokey serve`,
 * same fakes), so the benchmark can replay exactly those statements without twokey around them.
 */
import { Writable } from 'node:stream';
import { sql } from 'drizzle-orm';
import { parseConfig } from '../../src/config/config-file.js';
import { loadEnv } from '../../src/config/env.js';
import { startTwokey } from '../../src/runtime/server.js';
import { freePort } from '../../test/support/processes.js';
import { approveCycle } from './cycles.js';
import { countDatabaseWrites, openRecordedDatabase, prepareReplay, SqlRecorder, type CycleReplay, type RecordedStatement } from './sql-trace.js';
import { agentClient, createBenchDatabase } from './twokey-process.js';
import { sleep } from './stats.js';
import type { World } from './world.js';

/** Where each step of the recorded cycle ends, as an index into `statements`. */
export const RECORDED_STEPS = ['propose', 'post', 'click', 'execute', 'commit', 'edits and callbacks'] as const;

export interface RecordedCycle {
  /** Statements and transactions of each step, in RECORDED_STEPS order. */
  /** `roundTrips`: writes to the database's socket (PostgreSQL only; PGlite runs in the process). */
  steps: Array<{ step: (typeof RECORDED_STEPS)[number]; statements: number; transactions: number; roundTrips: number | null }>;
  /** The recording agent's id and key hash, which the replay must point at an agent of its own. */
  agentId: string;
  agentKeyHash: string;
  statements: RecordedStatement[];
}

function rows<T>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

export async function recordOneCycle(world: World, serverUrl: string | undefined): Promise<RecordedCycle> {
  const scratch = serverUrl ? await createBenchDatabase(serverUrl) : null;
  const recorder = new SqlRecorder();
  const database = await openRecordedDatabase(scratch?.url, recorder);
  const env = loadEnv({ ...world.env, HOST: '127.0.0.1', PORT: String(await freePort()), LOG_LEVEL: 'warn' });
  const running = await startTwokey({
    env,
    database,
    config: parseConfig(world.configYaml, world.env, 'bench'),
    logStream: new Writable({ write: (_chunk, _encoding, done) => done() }),
    rateLimit: { max: 1_000_000, timeWindowMs: 60_000 },
    // Only the cycle's own work: no idle polling, sweeping or audit integration (which runs off
    // the cycle, once per batch of many cycles) inside the recording.
    outboxPollMs: 60_000,
    sweepIntervalMs: 60_000,
    auditIntervalMs: 3_600_000,
  });
  try {
    const { agent, apiKey } = await running.services.agents.create({ name: 'bench-recorder' });
    const url = running.url;
    if (!url) throw new Error('the recording twokey is not listening');
    const client = agentClient(url, { id: agent.id, apiKey });
    // Warm: every pooled connection has met each statement (named statements are described on their first use there).
    for (let n = 0; n < 40; n += 1) await approveCycle(world, url, 'slack', client, n);
    // Push generated keys far above small constants (attempt counts, quorums) so the replay can
    // tell a job id in a parameter from a literal 1.
    await database.db.execute(sql`select setval(pg_get_serial_sequence('jobs', 'id'), 10000000)`);
    await database.db.execute(sql`select setval(pg_get_serial_sequence('audit_events', 'id'), 20000000)`);
    await sleep(300);
    const writes = scratch?.url ? countDatabaseWrites(Number(new URL(scratch.url).port || 5432)) : null;
    recorder.recording = true;
    const marks: number[] = [];
    const writeMarks: number[] = [];
    const mark = () => {
      marks.push(recorder.statements.length);
      writeMarks.push(writes?.count() ?? 0);
    };
    const id = await client.propose('bench_slack', { n: 40 });
    mark();
    await world.arrivals.wait(`slack:${id}`);
    // Let the post's own bookkeeping (message id, rendered version) land before the click.
    for (let seen = -1; seen !== recorder.statements.length;) {
      seen = recorder.statements.length;
      await sleep(300);
    }
    mark();
    await world.slackClick(url, id);
    mark();
    await world.arrivals.wait(`executed:${id}`);
    mark();
    await client.until(id, 'committed');
    mark();
    // The cycle goes on after the agent sees `committed`: the chat message is edited, callbacks sent.
    for (let seen = -1; seen !== recorder.statements.length;) {
      seen = recorder.statements.length;
      await sleep(500);
    }
    mark();
    recorder.recording = false;
    writes?.stop();
    const statements = recorder.statements.slice();
    const steps = RECORDED_STEPS.map((step, i) => {
      const slice = statements.slice(i === 0 ? 0 : marks[i - 1], marks[i]);
      return {
        step,
        statements: slice.length,
        transactions: new Set(slice.filter((s) => s.inTransaction).map((s) => s.unit)).size,
        roundTrips: writes ? (writeMarks[i] ?? 0) - (i === 0 ? 0 : (writeMarks[i - 1] ?? 0)) : null,
      };
    });
    const [keys] = rows<{ key_hash: string }>(await database.db.execute(sql`select key_hash from agents where id = ${agent.id}`));
    return { steps, agentId: agent.id, agentKeyHash: keys?.key_hash ?? '', statements };
  } finally {
    await running.close();
    await database.close();
    await scratch?.drop();
  }
}

export function replayOn(recorded: RecordedCycle, target: { agentId: string; agentKeyHash: string }): CycleReplay {
  return prepareReplay(
    recorded.statements,
    new Map([
      [recorded.agentId, target.agentId],
      [recorded.agentKeyHash, target.agentKeyHash],
    ]),
  );
}
