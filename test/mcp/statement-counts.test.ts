import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRecordedDatabase, SqlRecorder } from '../../bench/support/sql-trace.js';
import { drivers, openTestDatabase } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
import { connectClient, listen, readOnlyNotesConfig, startFakeUpstream, type FakeUpstream } from './support.js';

const UPSTREAM_TOKEN = 'upstream-token-0123456789abcdef';

/**
 * The SQL one `tools/call` of a read-only upstream tool sends through twokey, counted at the driver:
 * the pass-through should cost about what the upstream call costs, so a statement added to it fails
 * here (and one saved updates the figure).
 */
describe.each(drivers)('statements per MCP pass-through call (%s)', (driver) => {
  const recorder = new SqlRecorder();
  let upstream: FakeUpstream;
  let twokey: TestTwokey;
  let client: Client;
  let closeDatabases: () => Promise<void>;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ token: UPSTREAM_TOKEN });
    const scratch = driver === 'postgres' ? await openTestDatabase('postgres', { poolSize: 1 }) : null;
    const recorded = await openRecordedDatabase(scratch?.url, recorder);
    closeDatabases = async () => {
      await recorded.close();
      await scratch?.close();
    };
    twokey = await startTestTwokey({
      driver,
      database: recorded,
      configYaml: readOnlyNotesConfig(upstream, UPSTREAM_TOKEN),
      // Only the call's own work: no outbox poll, sweep or audit integration meanwhile.
      env: { TWOKEY_MCP_WAIT: '5' },
      outboxPollMs: 600_000,
      sweepIntervalMs: 600_000,
      auditIntervalMs: 3_600_000,
    });
    const { apiKey } = await twokey.createAgent('counted');
    client = await connectClient(await listen(twokey), apiKey);
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await twokey?.close();
    await closeDatabases?.();
    await upstream?.close();
  });

  const readNote = () => client.callTool({ name: 'notes_read_note', arguments: { name: 'groceries' } }) as Promise<CallToolResult>;

  it('passes a read-only tool through with the statements it needs and no more', async () => {
    // Warm: the upstream connection, the agent's rate-limit block (PostgreSQL).
    await readNote();
    const { value: result, statements, transactions } = await recorder.during(readNote);
    const figures = { statements: statements.length, outsideTransactions: statements.filter((statement) => !statement.inTransaction).length, transactions };
    expect(result.structuredContent).toMatchObject({ outcome: 'committed', result: { content: [{ type: 'text', text: 'milk, eggs' }] } });
    expect(figures, statements.map((s) => `[${s.inTransaction ? `tx${s.unit}` : 'auto'}] ${s.text.replace(/\s+/g, ' ').slice(0, 200)}`).join('\n')).toEqual({
      // The key is known (served from memory after the warm-up call). One statement, which
      // commits by itself, with no BEGIN: a read needs no claim, so it runs first, and the insert
      // (approved by the rule, committed with the upstream's answer) goes out after it with its
      // audit rows. The answer is the proposal as that insert wrote it: no read after.
      statements: 1,
      outsideTransactions: 1,
      transactions: 0,
    });
  });
});
