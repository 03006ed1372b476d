import type { manualClock } from './clock.js';

/** The part of the outbox's store `outboxAtRest` reads. */
interface OutboxJobs {
  countByStatus(): Promise<Record<string, number>>;
  backlog(now: Date): Promise<Array<{ due: number }>>;
}

/**
 * Resolves once the outbox is at rest at `now`: no job running, none due. A test that reads what the
 * outbox recorded, or acts beside it, waits for this instead of for the outside call a job made
 * (the job records its outcome only after that call answered).
 */
export async function outboxAtRest(jobs: OutboxJobs, now: () => Date): Promise<void> {
  for (let waited = 0; ; waited += 20) {
    const running = (await jobs.countByStatus()).running ?? 0;
    const due = (await jobs.backlog(now())).reduce((sum, kind) => sum + kind.due, 0);
    if (running === 0 && due === 0) return;
    if (waited > 20_000) throw new Error(`the outbox did not come to rest: ${running} running, ${due} due`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Moves a manual clock once the outbox is at rest. A jump made while a worker holds a job runs
 * that job's lease out, and a poller then claims it and runs it again (a Slack ping sent twice):
 * at-least-once redelivery, which other suites prove, not what a test of what happens at a later
 * time is about. With nothing due, no poll can claim anything before the jump, so none is in
 * flight across it.
 */
export async function advanceBetweenJobs(clock: ReturnType<typeof manualClock>, jobs: OutboxJobs, ms: number): Promise<void> {
  await outboxAtRest(jobs, clock);
  clock.advance(ms);
}
