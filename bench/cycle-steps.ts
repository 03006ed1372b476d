/**
 * `npm run bench:steps`: where a full chat cycle's CPU goes, step by step, in twokey and in the minimal
 * chat cycle (bench/support/minimal-chat-cycle.ts), on the same database and fakes. Between the steps
 * of each cycle (propose; the post reaching Slack; the click's answer; the downstream call; the
 * agent's long-poll seeing `committed`; a short wait for the edit) the server's CPU is read from
 * every thread's schedstat, so each step's figure is what the server spent from the end of the one
 * before: work a step starts and the next one finishes (the post job begun while the propose answers)
 * lands where it ran. The minimal answers a proposal before posting it and starts the execution
 * inside the click's step, so compare propose + post and click + execute, not each alone.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:steps
 *
 * Knobs: BENCH_STEPS_CYCLES (measured cycles a side, default 200, after 30 to warm up).
 */
import { approveCycle } from './support/cycles.js';
import { startMinimalChatCycle } from './support/listening-script.js';
import { round, sleep, threadsCpuMs } from './support/stats.js';
import { agentClient, createAgents, createBenchDatabase, startTwokeyProcess, type AgentClient } from './support/twokey-process.js';
import { startWorld, type World } from './support/world.js';

const CYCLES = Number(process.env.BENCH_STEPS_CYCLES ?? 200);
const WARMUP = 30;
const STEPS = ['propose', 'post', 'click', 'execute', 'commit', 'edit'] as const;
/** How long after `committed` the edit (and twokey's trail) is given before the next cycle. */
const EDIT_WAIT_MS = 10;

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error('bench/cycle-steps.ts compares with the minimal chat cycle, which runs on PostgreSQL: set DATABASE_URL');

/** Mean CPU ms of each step over `count` cycles through `url`, read from the server `pid`. */
async function stepsOf(world: World, url: string, agents: AgentClient[], pid: number, count: number): Promise<Record<(typeof STEPS)[number], number>> {
  const sums = STEPS.map(() => 0);
  for (let i = 0; i < count; i += 1) {
    const marks = [await threadsCpuMs(pid)];
    await approveCycle(world, url, 'slack', agents[i % agents.length]!, i, async () => void marks.push(await threadsCpuMs(pid)));
    await sleep(EDIT_WAIT_MS);
    marks.push(await threadsCpuMs(pid));
    STEPS.forEach((_, step) => (sums[step]! += marks[step + 1]! - marks[step]!));
  }
  world.forget();
  return Object.fromEntries(STEPS.map((step, index) => [step, round(sums[index]! / count, 2)])) as Record<(typeof STEPS)[number], number>;
}

const world = await startWorld();
const database = await createBenchDatabase(databaseUrl);
const twokey = await startTwokeyProcess(database, world.configYaml, world.env);
const minimalKey = 'bench-steps-minimal-key';
const minimal = await startMinimalChatCycle(world, database.url!, minimalKey);
try {
  // Agents share the cycles so that none reaches its rate limit (600 requests a minute).
  const agents = (await createAgents(database, world.configYaml, world.env, 8)).map((agent) => agentClient(twokey.url, agent));
  const minimalAgents = [agentClient(minimal.origin, { id: 'minimal', apiKey: minimalKey })];
  await stepsOf(world, twokey.url, agents, twokey.pid, WARMUP);
  await stepsOf(world, minimal.origin, minimalAgents, minimal.pid, WARMUP);
  const measured = {
    twokey: await stepsOf(world, twokey.url, agents, twokey.pid, CYCLES),
    minimal: await stepsOf(world, minimal.origin, minimalAgents, minimal.pid, CYCLES),
  };
  const total = (side: Record<string, number>) =>
    round(
      Object.values(side).reduce((sum, ms) => sum + ms, 0),
      2,
    );
  console.log(`\nCPU ms per step of a full chat cycle, mean of ${CYCLES} cycles at one agent (PostgreSQL)`);
  console.table([
    ...STEPS.map((step) => ({ step, twokey: measured.twokey[step], minimal: measured.minimal[step] })),
    { step: 'whole cycle', twokey: total(measured.twokey), minimal: total(measured.minimal) },
  ]);
} finally {
  await minimal.stop();
  await twokey.stop();
  await database.drop();
  await world.close();
}
