/**
 * Slack ack latency: 100 concurrent signed Approve clicks against a real twokey listening on
 * 127.0.0.1 (real fastify, real Bolt, PGlite in memory; Slack's Web API is a local fake). Slack gives
 * an app 3 s to answer; twokey answers when the listener acks, before the approval is decided.
 *   node --import tsx bench/slack-ack.ts
 *   DATABASE_URL=postgres://…/scratch node --import tsx bench/slack-ack.ts   # PostgreSQL instead (a database of its own: it is migrated and written to)
 * BENCH_CLICKS (default 100), BENCH_CONCURRENCY (clicks decided at once; default 4 on PGlite, 16 on PostgreSQL), BENCH_LOG (log level, default warn).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { parseConfig } from '../src/config/config-file.js';
import { loadEnv } from '../src/config/env.js';
import { openDatabase } from '../src/db/database.js';
import { startTwokey } from '../src/runtime/server.js';
import { createSlackIntegration } from '../src/slack/index.js';

const CLICKS = Number(process.env.BENCH_CLICKS ?? 100);
const SECRET = 'bench-signing-secret';
const CONFIG = `
operations:
  - name: restart_service
    description: bench
    params: { type: object, required: [service], properties: { service: { type: string } } }
    summary: "{{agent}} restarts {{params.service}}"
    approval: { approvers: [slack:U0ALICE], quorum: 1, slack: { channel: C0BENCH } }
    commit: on_approve
    executor: { type: echo }
`;

async function listen(server: ReturnType<typeof createServer>): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

/** Answers every Web API call with ok:true, as fast as it can. */
async function startFakeSlack() {
  let ts = 1_700_000_000_000_000;
  let posts = 0;
  let lastCallAt = Date.now();
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      lastCallAt = Date.now();
      if (request.url?.endsWith('chat.postMessage')) posts += 1;
      ts += 1;
      const text = String(ts);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ ok: true, channel: 'C0BENCH', ts: `${text.slice(0, 10)}.${text.slice(10)}` }));
    });
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}/api/`, posts: () => posts, lastCallAt: () => lastCallAt, close: () => new Promise((done) => server.close(done)) };
}

async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listen(server);
  await new Promise((done) => server.close(done));
  return port;
}

function click(proposalId: string, userId: string): { body: string; headers: Record<string, string> } {
  const payload = {
    type: 'block_actions',
    user: { id: userId, username: 'alice', name: 'alice', team_id: 'T0' },
    api_app_id: 'A0',
    token: 'legacy',
    trigger_id: `t-${randomBytes(4).toString('hex')}`,
    team: { id: 'T0', domain: 'bench' },
    channel: { id: 'C0BENCH', name: 'bench' },
    container: { type: 'message', channel_id: 'C0BENCH', message_ts: '1.1' },
    response_url: 'https://hooks.slack.com/actions/T0/1/x',
    actions: [{ type: 'button', action_id: 'twokey_approve', block_id: 'b', value: proposalId, action_ts: '1.2', text: { type: 'plain_text', text: 'Approve' } }],
  };
  const body = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = createHmac('sha256', SECRET).update(`v0:${timestamp}:${body}`).digest('hex');
  return {
    body,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': String(timestamp), 'x-slack-signature': `v0=${signature}` },
  };
}

/**
 * The clicks come from a worker thread with its own event loop, as they would come from Slack: a
 * client sharing twokey's event loop would measure its own queueing too.
 */
const LOAD_GENERATOR = `
const { parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
(async () => {
  const startedAt = Date.now();
  const send = async ({ body, headers }) => {
    const started = performance.now();
    const response = await fetch(workerData.url, { method: 'POST', headers, body });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error('click answered ' + response.status);
    return performance.now() - started;
  };
  const latencies = [];
  if (workerData.sequential) for (const request of workerData.requests) latencies.push(await send(request));
  else latencies.push(...(await Promise.all(workerData.requests.map(send))));
  parentPort.postMessage({ latencies, startedAt });
})().catch((error) => parentPort.postMessage({ error: String(error) }));
`;

async function fire(url: string, requests: Array<{ body: string; headers: Record<string, string> }>, sequential: boolean) {
  const worker = new Worker(LOAD_GENERATOR, { eval: true, workerData: { url, requests, sequential } });
  const [result] = (await once(worker, 'message')) as [{ latencies: number[]; startedAt: number } | { error: string }];
  await worker.terminate();
  if ('error' in result) throw new Error(result.error);
  return result;
}

const pick = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

async function main() {
  const fake = await startFakeSlack();
  const port = await freePort();
  const databaseUrl = process.env.DATABASE_URL;
  const database = await openDatabase({ databaseUrl, dataDir: '', memory: !databaseUrl, poolSize: 20 });
  const env = loadEnv({ PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: process.env.BENCH_LOG ?? 'warn', SLACK_BOT_TOKEN: 'xoxb-bench', SLACK_SIGNING_SECRET: SECRET, SLACK_API_URL: fake.url });
  const twokey = await startTwokey({
    env,
    database,
    config: parseConfig(CONFIG, {}, 'bench'),
    listen: true,
    rateLimit: { max: 1_000_000, timeWindowMs: 60_000 },
    integrations: (services) => [
      createSlackIntegration({ env, services, ...(process.env.BENCH_CONCURRENCY ? { clickConcurrency: Number(process.env.BENCH_CONCURRENCY) } : {}) }),
    ],
  });
  try {
    const { agent } = await twokey.services.agents.create({ name: `bench-${randomBytes(3).toString('hex')}` });
    const propose = async () => (await twokey.services.proposals.propose(agent, { operation: 'restart_service', params: { service: 'api' } })).proposal.id;
    const send = async (proposalId: string) => {
      const { body, headers } = click(proposalId, 'U0ALICE');
      const started = performance.now();
      const response = await fetch(`${twokey.url}/slack/events`, { method: 'POST', headers, body });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`click answered ${response.status}`);
      return performance.now() - started;
    };
    const waitFor = async (check: () => Promise<boolean> | boolean) => {
      while (!(await check())) await new Promise((done) => setTimeout(done, 10));
    };

    // Warm up the JIT, Bolt and the connection pool.
    for (let i = 0; i < 10; i += 1) await send(await propose());

    const rows: Array<Record<string, string>> = [];
    const scenarios = [
      { name: `${CLICKS} proposals, 1 click each, concurrent`, proposals: CLICKS, sequential: false },
      { name: `1 proposal, ${CLICKS} clicks, concurrent`, proposals: 1, sequential: false },
      { name: `${CLICKS} proposals, 1 click each, one after another`, proposals: CLICKS, sequential: true },
    ];
    for (const scenario of scenarios) {
      const expectedPosts = fake.posts() + scenario.proposals;
      const ids = await Promise.all(Array.from({ length: scenario.proposals }, propose));
      // Let the outbox post the messages (and finish earlier edits) first: clicks measured on their own.
      await waitFor(() => fake.posts() >= expectedPosts);
      await waitFor(() => Date.now() - fake.lastCallAt() > 500);
      const requests = Array.from({ length: CLICKS }, (_, i) => click(ids[i % ids.length] ?? '', 'U0ALICE'));
      const { latencies, startedAt } = await fire(`${twokey.url}/slack/events`, requests, scenario.sequential);
      await waitFor(async () => (await Promise.all(ids.map((id) => twokey.services.proposals.get(id)))).every((p) => p.status === 'committed'));
      const committed = Date.now() - startedAt;
      latencies.sort((a, b) => a - b);
      rows.push({
        scenario: scenario.name,
        'ack p50 ms': pick(latencies, 0.5).toFixed(1),
        'ack p99 ms': pick(latencies, 0.99).toFixed(1),
        'ack max ms': (latencies.at(-1) ?? 0).toFixed(1),
        'all committed ms': String(committed),
      });
    }
    console.log(`Slack ack latency: signed Approve clicks over HTTP from another thread, ${database.kind} (node ${process.version})`);
    console.table(rows);
  } finally {
    await twokey.close();
    await database.close();
    await fake.close();
  }
}

await main();
