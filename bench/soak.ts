/**
 * `npm run bench:soak`: ten minutes of mixed load on one `twokey serve`, watching its resident
 * memory. Passes its target when memory at the end is at most 10 % above memory after the first
 * minute (the first minute is warm-up: JIT, connection pools and database buffers fill).
 *
 *   npm run bench:soak                                    # PGlite
 *   DATABASE_URL=postgres://… npm run bench:soak          # PostgreSQL (a throwaway database on it)
 *
 * The mix, 8 agents at once, each starting its next piece of work when the last one ended:
 * 35 % approved in Slack, 25 % approved in Discord, 15 % rejected in Slack, 10 % rejected in
 * Discord, 10 % proposed then cancelled by the agent, 5 % operators' reads (/v1/operations,
 * /readyz, /metrics). BENCH_SOAK_SECONDS changes the length (default 600).
 * Figures are printed and written to bench/results/latest.json (section "soak").
 */
import { performance } from 'node:perf_hooks';
import { approveCycle, type Chat } from './support/cycles.js';
import { recordResults, round, rssMiB, sleep } from './support/stats.js';
import { agentClient, createAgents, createBenchDatabase, startTwokeyProcess, type AgentClient } from './support/twokey-process.js';
import { startWorld, type World } from './support/world.js';

const SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 600);
const WORKERS = 8;
const SAMPLE_EVERY_MS = 5_000;
const WARM_UP_MS = Math.min(60_000, (SECONDS * 1000) / 5);
const GROWTH_LIMIT = 0.1;

type Work = 'slack approve' | 'discord approve' | 'slack reject' | 'discord reject' | 'cancel' | 'reads';
const MIX: Array<[Work, number]> = [
  ['slack approve', 35],
  ['discord approve', 25],
  ['slack reject', 15],
  ['discord reject', 10],
  ['cancel', 10],
  ['reads', 5],
];

function pickWork(): Work {
  let roll = Math.random() * 100;
  for (const [work, weight] of MIX) {
    roll -= weight;
    if (roll < 0) return work;
  }
  return 'reads';
}

async function rejectCycle(world: World, url: string, chat: Chat, agent: AgentClient, n: number) {
  const id = await agent.propose(`bench_${chat}`, { n });
  await world.arrivals.wait(`${chat}:${id}`);
  await (chat === 'slack' ? world.slackReject(url, id) : world.discordReject(url, id));
  await agent.until(id, 'rejected');
}

async function perform(work: Work, world: World, url: string, agent: AgentClient, apiKey: string, n: number) {
  switch (work) {
    case 'slack approve':
      return void (await approveCycle(world, url, 'slack', agent, n));
    case 'discord approve':
      return void (await approveCycle(world, url, 'discord', agent, n));
    case 'slack reject':
      return rejectCycle(world, url, 'slack', agent, n);
    case 'discord reject':
      return rejectCycle(world, url, 'discord', agent, n);
    case 'cancel': {
      const id = await agent.propose('bench_slack', { n });
      await world.arrivals.wait(`slack:${id}`);
      return agent.cancel(id);
    }
    case 'reads':
      for (const [path, auth] of [
        ['/v1/operations', true],
        ['/readyz', false],
        ['/metrics', false],
      ] as const) {
        const response = await fetch(`${url}${path}`, auth ? { headers: { authorization: `Bearer ${apiKey}` } } : {});
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`${path} answered ${response.status}`);
      }
  }
}

async function main() {
  const world = await startWorld();
  const database = await createBenchDatabase(process.env.DATABASE_URL);
  const twokey = await startTwokeyProcess(database, world.configYaml, world.env);
  try {
    const agents = await createAgents(database, world.configYaml, world.env, 100);
    const clients = agents.map((agent) => agentClient(twokey.url, agent));
    const done = new Map<Work, number>(MIX.map(([work]) => [work, 0]));
    const samples: Array<{ atSeconds: number; rssMiB: number }> = [];
    const started = performance.now();
    const elapsed = () => performance.now() - started;
    const sampler = setInterval(() => {
      void rssMiB(twokey.pid).then((rss) => samples.push({ atSeconds: round(elapsed() / 1000, 0), rssMiB: rss }));
    }, SAMPLE_EVERY_MS);
    const forgetter = setInterval(() => world.forget(), 60_000);
    let n = 0;
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (elapsed() < SECONDS * 1000) {
          const index = n++;
          const work = pickWork();
          await perform(
            work,
            world,
            twokey.url,
            clients[index % clients.length] as AgentClient,
            (agents[index % agents.length] as { apiKey: string }).apiKey,
            index,
          );
          done.set(work, (done.get(work) ?? 0) + 1);
        }
      }),
    );
    clearInterval(sampler);
    clearInterval(forgetter);
    await sleep(2_000);
    samples.push({ atSeconds: round(elapsed() / 1000, 0), rssMiB: await rssMiB(twokey.pid) });

    const afterWarmUp = samples.find((sample) => sample.atSeconds * 1000 >= WARM_UP_MS) ?? samples[0];
    const final = samples.at(-1);
    if (!afterWarmUp || !final) throw new Error('no memory samples');
    const growth = final.rssMiB / afterWarmUp.rssMiB - 1;
    const figures = {
      at: new Date().toISOString(),
      driver: database.kind,
      seconds: SECONDS,
      workers: WORKERS,
      completed: Object.fromEntries(done),
      operationsPerSecond: round([...done.values()].reduce((sum, count) => sum + count, 0) / SECONDS),
      rssMiB: { start: samples[0]?.rssMiB, afterWarmUp: afterWarmUp.rssMiB, peak: Math.max(...samples.map((s) => s.rssMiB)), end: final.rssMiB },
      growthAfterWarmUpPercent: round(growth * 100),
      target: `at most ${GROWTH_LIMIT * 100} % growth after warm-up`,
      met: growth <= GROWTH_LIMIT,
      samples,
    };
    console.log(`soak: ${SECONDS} s of mixed load on ${database.kind}, ${WORKERS} agents at once`);
    console.table([{ ...figures.completed, 'ops/s': figures.operationsPerSecond }]);
    console.table([{ ...figures.rssMiB, 'growth %': figures.growthAfterWarmUpPercent, met: figures.met }]);
    console.log(`written to ${await recordResults(`soak-${database.kind}`, figures)}`);
  } finally {
    await twokey.stop();
    await database.drop();
    await world.close();
  }
}

await main();
