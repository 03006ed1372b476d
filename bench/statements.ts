/**
 * `npm run bench:statements`: the SQL one full cycle sends, step by step (propose, post, click,
 * execute, commit, edits and callbacks), recorded at the driver of an in-process twokey. With
 * DATABASE_URL, on a throwaway database of that PostgreSQL server; otherwise on PGlite.
 * BENCH_SQL_TEXT=1 prints each statement's text too.
 */
import { recordOneCycle } from './support/raw-baseline.js';
import { startWorld } from './support/world.js';

const world = await startWorld();
try {
  const recorded = await recordOneCycle(world, process.env.DATABASE_URL);
  let index = 0;
  for (const step of recorded.steps) {
    const trips = step.roundTrips === null ? '' : `, ${step.roundTrips} round trips`;
    console.log(`\n${step.step}: ${step.statements} statements, ${step.transactions} transactions${trips}`);
    const slice = recorded.statements.slice(index, index + step.statements);
    index += step.statements;
    if (process.env.BENCH_SQL_TEXT) {
      for (const statement of slice)
        console.log(`  [${statement.inTransaction ? `tx${statement.unit}` : 'auto'}] ${statement.text.replace(/\s+/g, ' ').slice(0, 300)}`);
    }
  }
  console.log(
    `\ntotal: ${recorded.statements.length} statements, ${new Set(recorded.statements.filter((s) => s.inTransaction).map((s) => s.unit)).size} transactions`,
  );
} finally {
  await world.close();
}
