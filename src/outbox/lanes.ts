import type { Logger } from 'pino';
import type { JobRow, JobSlot, JobStore } from './ports.js';

// The outbox's lanes (src/outbox/README.md, "Lanes"): what a lane is, its state in a worker, the
// renewal of its leases, and the slots it lends to jobs taken as they are queued.

/**
 * A lane is a queue of its own with its own slots: a job kind that waits on slow outsiders (an
 * agent's callback receiver) can fill its lane but never another's.
 */
export interface OutboxLane {
  name: string;
  /** The kinds this lane runs; a lane without `kinds` runs every kind no other lane names. */
  kinds?: readonly string[];
  concurrency: number;
  /** At most this many jobs per destination (`payload.destination`) at once on this worker. */
  perDestination?: number;
  /** At most this many jobs per agent (`payload.agentId`) at once on this worker, whatever their destinations. */
  perAgent?: number;
  /**
   * This lane's own lease, renewed every third of it while a job runs: a job whose worker died is
   * claimable again within this long, however long a live run takes. Without it, the worker's
   * lease (60 s) is taken once and never renewed.
   */
  renewedLeaseMs?: number;
  /** How long one run may take in this lane (default: the worker's deadline). */
  handlerDeadlineMs?: number;
  /**
   * Asked before each claim: false holds the lane's due jobs back, and it asks again every
   * `admitRecheckMs` (25 ms). `running` is how many of its jobs run now.
   */
  admit?(state: { running: number }): boolean;
  admitRecheckMs?: number;
}

/**
 * Chat posts and edits, agents' callbacks, and everything else never wait on each other. In the
 * callbacks lane each agent gets at most `callbacksPerAgent` slots, and half of them at most towards
 * any one host: an agent's receiver that hangs holds its own callbacks back, not anyone else's.
 */
export function defaultLanes(callbacksPerAgent = 4): OutboxLane[] {
  return [
    { name: 'chat', kinds: ['chat.sync'], concurrency: 8 },
    {
      name: 'callbacks',
      kinds: ['callback.deliver'],
      concurrency: 16,
      perAgent: callbacksPerAgent,
      perDestination: Math.ceil(callbacksPerAgent / 2),
    },
    { name: 'other', concurrency: 4 },
  ];
}

/** The lane that runs a kind: the lane naming it, else the first lane without `kinds` (as the worker claims them). */
export function laneOf(kind: string, lanes: readonly OutboxLane[] = defaultLanes()): string {
  return (lanes.find((lane) => lane.kinds?.includes(kind)) ?? lanes.find((lane) => !lane.kinds))?.name ?? 'none';
}

/** What a worker keeps of one lane: its slots, the jobs it runs, its claim and its timers. */
export interface LaneState {
  lane: OutboxLane;
  leaseMs: number;
  handlerDeadlineMs: number;
  /** The jobs this lane runs now, for renewing their leases. */
  held: Map<number, JobRow>;
  renewTimer: NodeJS.Timeout | null;
  claimFilter: { kinds?: readonly string[]; excludeKinds?: readonly string[] };
  running: Set<Promise<void>>;
  /** Slots held for jobs a transaction's statement is claiming (`takeJob`), not yet run or given back. */
  reserved: number;
  perDestination: Map<string, number>;
  perAgent: Map<string, number>;
  claiming: Promise<void> | null;
  timer: NodeJS.Timeout | null;
  /** When `timer` fires (Date.now() time). */
  timerDueAt: number;
  wakeRequested: boolean;
  /** The last claim filled every free slot: more jobs may be due than it could take. */
  moreMayBeDue: boolean;
  /**
   * When jobs this lane knows of fall due (Date.now() times), earliest first: those it put back for a
   * retry, and those this process queued to run shortly. Every one is kept, not only the earliest: a
   * claim made before a later one falls due must still leave it a wake-up, or that job waits for the
   * next poll.
   */
  wakeUpsAt: TimedWakeUp[];
}

/** A job of a lane falls due `at` (Date.now() time); `key`, its ordering key, lets the lane forget it once the job ran sooner. */
export interface TimedWakeUp {
  at: number;
  key: string | null;
}

/**
 * While a lane with a renewed lease runs jobs, extends their leases every third of it. A renewal
 * that fails (the database is away) is tried again at the next tick; if the lease runs out
 * meanwhile another worker may run the job again, and this run's outcome is then dropped.
 */
export function createLeaseRenewal(options: { jobs: Pick<JobStore, 'renew'>; logger: Logger }, clock: () => Date) {
  function keepRenewing(state: LaneState): void {
    if (!state.lane.renewedLeaseMs || state.renewTimer || state.held.size === 0) return;
    state.renewTimer = setTimeout(
      () => {
        state.renewTimer = null;
        if (state.held.size === 0) return;
        options.jobs
          .renew([...state.held.values()], new Date(clock().getTime() + state.leaseMs))
          .catch((error: unknown) => options.logger.warn({ err: error, lane: state.lane.name }, 'outbox lease renewal failed'))
          .finally(() => keepRenewing(state));
      },
      Math.max(10, Math.floor(state.leaseMs / 3)),
    );
    state.renewTimer.unref();
  }
  function stop(state: LaneState): void {
    if (state.renewTimer) clearTimeout(state.renewTimer);
    state.renewTimer = null;
  }
  return { keepRenewing, stop };
}

/** A lane's state before its first claim; refuses a lane whose jobs could outlive their unrenewed lease. */
export function newLaneState(lane: OutboxLane, namedKinds: readonly string[], leaseMs: number, handlerDeadlineMs: number): LaneState {
  if (!lane.renewedLeaseMs && (lane.handlerDeadlineMs ?? handlerDeadlineMs) >= leaseMs) {
    throw new Error(`the outbox lease (${leaseMs} ms) must be longer than the handler deadline of lane ${lane.name}`);
  }
  return {
    lane,
    leaseMs: lane.renewedLeaseMs ?? leaseMs,
    handlerDeadlineMs: lane.handlerDeadlineMs ?? handlerDeadlineMs,
    held: new Map(),
    renewTimer: null,
    claimFilter: lane.kinds ? { kinds: lane.kinds } : { excludeKinds: namedKinds },
    running: new Set(),
    reserved: 0,
    perDestination: new Map(),
    perAgent: new Map(),
    claiming: null,
    timer: null,
    timerDueAt: 0,
    wakeRequested: false,
    moreMayBeDue: true,
    wakeUpsAt: [],
  };
}

/** Slots of a lane neither running a job nor held for one being inserted claimed. */
export const freeSlots = (state: LaneState): number => state.lane.concurrency - state.running.size - state.reserved;

/**
 * Holds a slot of `state`'s lane for a job a transaction is inserting already claimed (see
 * `JobSlot`): only while the worker runs, for a lane with no caps and no gate, which a claim would
 * apply, and with a slot free; otherwise null, and the job is queued and claimed as any other.
 * `worker.launch` starts the job in the slot; `worker.pump` lets the lane claim into a slot given back.
 */
export function lendSlot(
  state: LaneState | undefined,
  workerId: string,
  worker: { running(): boolean; launch(state: LaneState, job: JobRow, known: unknown): void; pump(state: LaneState): void },
): JobSlot | null {
  if (!worker.running() || !state || state.lane.perAgent || state.lane.perDestination || state.lane.admit || freeSlots(state) <= 0) return null;
  state.reserved += 1;
  let held = true;
  const giveBack = (): boolean => {
    if (!held) return false;
    held = false;
    state.reserved -= 1;
    return true;
  };
  return {
    lockedBy: `${workerId}:1`,
    leaseMs: state.leaseMs,
    run(job, known) {
      // Stopped meanwhile: the job stays claimed until its lease runs out, then any worker runs it.
      if (giveBack() && worker.running()) worker.launch(state, job, known);
    },
    release() {
      // A claim that found the lane full waits for a slot to come free: this is one.
      if (giveBack() && (state.wakeRequested || state.moreMayBeDue)) worker.pump(state);
    },
  };
}

/** The job's `destination` or `agentId`, by which a lane caps what runs at once. */
export const payloadKey = (job: JobRow, name: 'destination' | 'agentId'): string | null => (typeof job.payload[name] === 'string' ? job.payload[name] : null);

/** One more job running under `key` (none: not counted). */
export function countRunning(counts: Map<string, number>, key: string | null): void {
  if (key) counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** One job fewer running under `key`; a key with none left is forgotten. */
export function uncountRunning(counts: Map<string, number>, key: string | null): void {
  if (!key) return;
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

/** The jobs due in this lane now, as many as it has free slots, within its caps (one claim statement). */
export function claimForLane(jobs: Pick<JobStore, 'claimDue'>, state: LaneState, workerId: string, now: Date): Promise<JobRow[]> {
  return jobs.claimDue(now, freeSlots(state), state.leaseMs, {
    workerId,
    ...state.claimFilter,
    perDestination: state.lane.perDestination,
    running: state.perDestination,
    perAgent: state.lane.perAgent,
    runningByAgent: state.perAgent,
  });
}

/** How many timed wake-ups a lane keeps; past them the poll finds the jobs. */
const MAX_TIMED_WAKE_UPS = 1_000;

/** Where a wake-up due `at` goes in the ascending `dues` to keep them sorted (after equal ones). */
function sortedIndex(dues: readonly TimedWakeUp[], at: number): number {
  let low = 0;
  let high = dues.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((dues[middle]?.at ?? 0) <= at) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Keeps a timed wake-up in order; false when the lane keeps as many already and all are sooner. */
export function addWakeUp(state: LaneState, wakeUp: TimedWakeUp): boolean {
  const dues = state.wakeUpsAt;
  // Beyond the bound, the poll finds the latest ones (thousands of jobs failing at once).
  if (dues.length >= MAX_TIMED_WAKE_UPS && wakeUp.at >= (dues.at(-1)?.at ?? 0)) return false;
  dues.splice(sortedIndex(dues, wakeUp.at), 0, wakeUp);
  if (dues.length > MAX_TIMED_WAKE_UPS) dues.pop();
  return true;
}

/** When the lane's next timed wake-up falls due; undefined for none. */
export const nextWakeUpAt = (state: LaneState): number | undefined => state.wakeUpsAt[0]?.at;

/** Drops the wake-ups due by `now`: the claim about to be made finds their jobs. */
export function dropWakeUpsDue(state: LaneState, now: number): void {
  while ((state.wakeUpsAt[0]?.at ?? Number.POSITIVE_INFINITY) <= now) state.wakeUpsAt.shift();
}

/** Drops the first wake-up for a job of ordering key `key`, and returns it; null when there is none. */
export function dropWakeUpOf(state: LaneState, key: string | null): TimedWakeUp | null {
  const index = key === null ? -1 : state.wakeUpsAt.findIndex((due) => due.key === key);
  return index < 0 ? null : (state.wakeUpsAt.splice(index, 1)[0] ?? null);
}
