import { createBenchDatabase, startTwokeyProcess } from './support/twokey-process.js';
import { startWorld } from './support/world.js';
import { withCpu } from './support/hotpath.js';
import { sleep } from './support/stats.js';
const world = await startWorld();
const database = await createBenchDatabase(process.env.DATABASE_URL);
const prof = process.env.PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.PROF}`] : [];
const twokey = await startTwokeyProcess(database, world.configYaml, world.env, prof);
for (const [at, span] of [[3000, 5000], [0, 10000], [0, 10000]] as const) {
  await sleep(at);
  const { cpuMs } = await withCpu(twokey.pid, () => sleep(span));
  console.log(`idle CPU ${(cpuMs / (span / 1000)).toFixed(1)} ms/s over ${span} ms`);
}
await twokey.stop();
await world.close();
await database.drop?.();
