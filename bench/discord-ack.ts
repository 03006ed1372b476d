/**
 * Discord interaction response latency: how long POST /discord/interactions takes to answer a signed
 * button press (Discord drops interactions not answered within 3 s) when 100 arrive at once, over real
 * HTTP on loopback, against an in-process twokey and a local fake Discord REST API.
 *   node --import tsx bench/discord-ack.ts                          # PGlite (in memory)
 *   DATABASE_URL=postgres://… node --import tsx bench/discord-ack.ts   # PostgreSQL (a throwaway database on that server)
 * BENCH_CLICKS sets the number of concurrent clicks (default 100).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { parseConfig } from '../src/config/config-file.js';
import { loadEnv } from '../src/config/env.js';
import { openDatabase } from '../src/db/database.js';
import { createDiscordIntegration } from '../src/discord/index.js';
import { startTwokey } from '../src/runtime/server.js';
import { startFakeDiscord } from '../test/discord/fake-discord.js';
import { ALICE, APPLICATION_ID, BOT_TOKEN, MALLORY, buttonPress, discordConfigYaml, makeSigner } from '../test/discord/helpers.js';
import { freePort } from '../test/support/processes.js';
import postgres from 'postgres';

const CLICKS = Number(process.env.BENCH_CLICKS ?? 100);

function percentiles(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { p50: pick(0.5), p99: pick(0.99), max: sorted.at(-1) ?? 0 };
}

const ms = (value: number) => `${value.toFixed(1)} ms`;

async function main() {
  const fake = await startFakeDiscord({ applicationId: APPLICATION_ID });
  const signer = makeSigner();
  const port = await freePort();
  const env = loadEnv({
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    DISCORD_BOT_TOKEN: BOT_TOKEN,
    DISCORD_APPLICATION_ID: APPLICATION_ID,
    DISCORD_PUBLIC_KEY: signer.publicKeyHex,
    DISCORD_API_URL: fake.apiUrl,
  });
  const scratch = process.env.DATABASE_URL ? await scratchDatabase(process.env.DATABASE_URL) : null;
  const database = await openDatabase({ databaseUrl: scratch?.url, dataDir: '', memory: !scratch, poolSize: 10 });
  const running = await startTwokey({
    env,
    database,
    config: parseConfig(discordConfigYaml, {}, 'bench.yaml'),
    logStream: new Writable({ write: (_chunk, _encoding, done) => done() }),
    rateLimit: { max: 1_000_000, timeWindowMs: 60_000 },
    sweepIntervalMs: 60_000,
    integrations: (services) => [createDiscordIntegration({ env, services })],
  });
  const url = `http://127.0.0.1:${port}/discord/interactions`;

  const { agent } = await running.services.agents.create({ name: `bench-${Date.now()}` });
  const ids: string[] = [];
  for (let i = 0; i < CLICKS; i += 1) {
    const { proposal } = await running.services.proposals.propose(agent, { operation: 'delete_workspace', params: { workspace: `w${i}` } });
    ids.push(proposal.id);
  }
  // Let the proposal messages go out first, so the clicks race only their own work.
  while (fake.callsTo('POST', /^\/channels\/\d+\/messages$/).length < CLICKS) await new Promise((done) => setTimeout(done, 20));

  async function click(payload: unknown): Promise<{ latency: number; type: number }> {
    const body = JSON.stringify(payload);
    const started = performance.now();
    const response = await fetch(url, { method: 'POST', headers: signer.headers(body, Math.floor(Date.now() / 1000)), body });
    const answer = (await response.json()) as { type: number };
    if (response.status !== 200) throw new Error(`interaction answered ${response.status}`);
    return { latency: performance.now() - started, type: answer.type };
  }

  // Round 1: approvers' clicks on CLICKS different proposals, all at once. Each answer is a deferred
  // update (type 6) after the read-only checks; the approval, execution and message edit follow it.
  const started = performance.now();
  const approvals = await Promise.all(ids.map((id) => click(buttonPress(`twokey:approve:${id}`, { userId: ALICE }))));
  const answeredAll = performance.now() - started;
  const deferred = approvals.filter((a) => a.type === 6).length;
  const committedMessages = () =>
    [...fake.messages.values()].filter((m) => JSON.stringify(m.body.embeds[0].fields[0]).includes('Committed')).length;
  while (committedMessages() < CLICKS) await new Promise((done) => setTimeout(done, 20));
  const settledAll = performance.now() - started;

  // Round 2: non-approvers' clicks, answered with the ephemeral refusal itself (type 4).
  const refusals = await Promise.all(ids.map((id) => click(buttonPress(`twokey:approve:${id}`, { userId: MALLORY }))));

  const approve = percentiles(approvals.map((a) => a.latency));
  const refuse = percentiles(refusals.map((a) => a.latency));
  console.log(`database: ${database.kind}; ${CLICKS} concurrent signed clicks over loopback HTTP; node ${process.version}`);
  const late = (samples: Array<{ latency: number }>) => samples.filter((s) => s.latency > 3_000).length;
  console.log(`approve (type 6, ${deferred}/${CLICKS}):  p50 ${ms(approve.p50)}  p99 ${ms(approve.p99)}  max ${ms(approve.max)}  over 3 s: ${late(approvals)}`);
  console.log(`refuse  (type 4, ephemeral):  p50 ${ms(refuse.p50)}  p99 ${ms(refuse.p99)}  max ${ms(refuse.max)}  over 3 s: ${late(refusals)}`);
  console.log(`all ${CLICKS} answered in ${ms(answeredAll)}; every proposal committed and its message edited after ${ms(settledAll)}`);

  await running.close();
  await database.close();
  await scratch?.drop();
  await fake.close();
}

/** A database of its own on the given server, dropped afterwards, so the bench never writes into a real one. */
async function scratchDatabase(serverUrl: string) {
  const name = `twokey_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

await main();
