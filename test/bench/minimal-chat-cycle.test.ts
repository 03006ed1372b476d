import postgres from 'postgres';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { startMinimalChatCycle, type ListeningScript } from '../../bench/support/listening-script.js';
import { agentClient } from '../../bench/support/twokey-process.js';
import { SLACK_APPROVER, SLACK_BOT_TOKEN, SLACK_CHANNEL, startWorld, type World } from '../../bench/support/world.js';
import { describeOnPostgres, openTestDatabase } from '../support/database.js';

/**
 * The minimal chat cycle is the floor twokey's CPU per chat cycle is judged against: a floor that
 * skipped a step (an unchecked signature, a downstream call not made, an edit not sent) would make
 * twokey look worse than it is. Each step it stands for is checked here, on the wire of the fakes.
 */
describeOnPostgres('the minimal chat cycle (bench/support/minimal-chat-cycle.ts)', () => {
  const apiKey = 'minimal-test-key';
  let world: World;
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let minimal: ListeningScript;
  let sql: postgres.Sql;

  beforeAll(async () => {
    world = await startWorld();
    database = await openTestDatabase('postgres', { poolSize: 1 });
    minimal = await startMinimalChatCycle(world, database.url!, apiKey);
    sql = postgres(database.url!, { max: 1, onnotice: () => {} });
  });

  afterAll(async () => {
    await sql?.end();
    await minimal?.stop();
    await database?.close();
    await world?.close();
  });

  const rowOf = async (id: string) =>
    (
      await sql<Array<{ status: string; message_ts: string | null; decided_by: string | null; result: unknown }>>`
      select status, message_ts, decided_by, result from bench_minimal_proposals where id = ${id}`
    )[0];

  it('records each step before the next, checks the click and the agent, and signs the downstream call', async () => {
    const unknownAgent = await fetch(`${minimal.origin}/v1/proposals`, {
      method: 'POST',
      headers: { authorization: 'Bearer someone-else', 'content-type': 'application/json' },
      body: JSON.stringify({ operation: 'bench_slack', params: { n: 0 } }),
    });
    expect(unknownAgent.status).toBe(401);

    const agent = agentClient(minimal.origin, { id: 'minimal', apiKey });
    const id = await agent.propose('bench_slack', { n: 1 });
    await world.arrivals.wait(`slack:${id}`, 10_000);
    const post = world.slack.calls.find((call) => call.method === 'chat.postMessage');
    expect(post?.authorization).toBe(`Bearer ${SLACK_BOT_TOKEN}`);
    await vi.waitFor(async () => expect((await rowOf(id))?.message_ts).toBeTruthy());

    // A click with a wrong signature is refused (forgedClick expects the 401) and changes nothing.
    await world.forgedClick(minimal.origin, 'slack', id);
    expect((await rowOf(id))?.status).toBe('pending');

    await world.slackClick(minimal.origin, id);
    await world.arrivals.wait(`executed:${id}`, 10_000);
    const executed = world.downstream.requests.find((request) => request.idempotencyKey === id);
    expect(executed?.signatureValid).toBe(true);

    await agent.until(id, 'committed');
    const row = await rowOf(id);
    expect(row).toMatchObject({ status: 'committed', decided_by: SLACK_APPROVER, result: { applied: true, key: id } });
    await vi.waitFor(() =>
      expect(world.slack.calls.find((call) => call.method === 'chat.update')?.args).toMatchObject({ channel: SLACK_CHANNEL, ts: row?.message_ts }),
    );
  });
});
