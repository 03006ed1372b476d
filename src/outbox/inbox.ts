import type { ChatPlatformJobs } from '../core/chat-platform.js';
import type { JobHandler, JobOf, JobPayloads } from '../core/jobs.js';
import { clickJobKinds } from '../platforms/jobs.js';
import { plainReason } from '../lib/driver-errors.js';
import type { JobStore, NewJob } from './ports.js';
import type { OutboxLane } from './worker.js';

/**
 * The inbox: a click from a chat platform is stored as an outbox job before it is answered, and
 * decided from there. Chat platforms do not send a click again, so a click answered and then
 * lost with its process would be lost for good; stored first, it is decided by whichever process
 * runs next (see README.md, "The inbox").
 */

/** The job kinds of stored clicks, every platform's (its `clickJobs`); all run in the `clicks` lane. */
export type ClickJobKind = keyof ChatPlatformJobs;

/**
 * How long a stored click's run holds its claim before another process may take it over: renewed
 * while the run lasts, so only a dead process's click waits this long after a restart.
 */
export const CLICK_LEASE_MS = 6_000;

/**
 * Longest one run of a click may take. An approval that completes the quorum runs the operation,
 * whose executor allows itself up to 5 minutes; the claim is renewed meanwhile.
 */
export const CLICK_HANDLER_DEADLINE_MS = 6 * 60_000;

/**
 * A click whose run keeps failing (the database away, Slack's user groups unreadable) is tried
 * this often, backing off from 1 s to 5 minutes: about 20 minutes in all, after which it is
 * `dead` and listed by `twokey jobs list`.
 */
export const CLICK_MAX_ATTEMPTS = 12;

/**
 * The `clicks` lane: its own slots, so a backlog of chat edits or callbacks never delays a decision.
 * With `admit` (the inbox's burst gate) decisions wait while clicks arrive.
 */
export function clickLane(concurrency: number, admit?: OutboxLane['admit']): OutboxLane {
  return {
    name: 'clicks',
    kinds: clickJobKinds,
    concurrency,
    renewedLeaseMs: CLICK_LEASE_MS,
    handlerDeadlineMs: CLICK_HANDLER_DEADLINE_MS,
    ...(admit ? { admit } : {}),
  };
}

/** The words a clicker sees (privately) when their click could not be stored: nothing was decided. */
export const INBOX_UNAVAILABLE_WORDS = 'twokey cannot reach its database, try again in a minute. Nothing was changed.';

/** Thrown by `store` when the click could not be written in time: answer with INBOX_UNAVAILABLE_WORDS. */
export class InboxUnavailable extends Error {
  constructor(readonly reason: string) {
    super(`the click could not be stored: ${reason}`);
    this.name = 'InboxUnavailable';
  }
}

/**
 * A click to store, its payload typed by its kind (src/core/jobs.ts): only what deciding needs, no
 * response URL, an interaction token only sealed.
 */
export type StoredClick = Extract<JobOf<JobPayloads>, { kind: ClickJobKind }> & {
  /** The proposal's clicks are decided in the order they were stored. */
  proposalId: string;
};

export interface ClickInbox {
  /** Resolves with the click's job id once it is committed; rejects with InboxUnavailable otherwise. */
  store(click: StoredClick): Promise<number>;
  /** Starts the stored clicks now instead of at the next poll: call it once the answer is on its way. */
  wake(kind: ClickJobKind): void;
  /** Takes back a stored click no worker has started (its answer never reached the platform). */
  withdraw(id: number): Promise<boolean>;
  /**
   * Resolves once every click this process stored (of this kind) has been decided, by any process,
   * and whatever a decision here started (an approval's execution) has ended, or after `timeoutMs`.
   */
  settle(kind?: ClickJobKind, timeoutMs?: number): Promise<void>;
  /** A worker of this process settled a job: one id fewer for `settle` to look up. */
  settled(id: number): void;
  /**
   * The handler for stored clicks of one kind, guarded: a click this process answered as not stored,
   * whose write landed later and which a worker here claimed before it could be deleted, is skipped.
   */
  guard<K extends ClickJobKind>(handler: JobHandler<K>): JobHandler<K>;
  /**
   * The burst gate of the `clicks` lane: false while a burst is arriving or being written (two or
   * more clicks, each less than `burstGapMs` after the one before, while an earlier one is still
   * being written or undecided), so their writes, which their answers wait for, do not queue behind
   * decisions (in the embedded database's one queue, and on the event loop); true again once the
   * burst is over, or, one decision at a time, once decisions have been held back `maxHoldMs`. A
   * lone click, once written, is let through at once.
   */
  admitDecisions(state: { running: number }): boolean;
}

export interface ClickInboxOptions {
  jobs: Pick<JobStore, 'insertMany' | 'withdraw' | 'unfinished'>;
  clock: () => Date;
  /** Wakes this process's outbox for these kinds. */
  wake(kinds: readonly string[]): void;
  /**
   * Longest the write may take before the click is answered as not stored. Slack and Discord wait
   * 3 s for an answer; a database that does not answer in 2 s is treated as away.
   */
  storeDeadlineMs?: number;
  /** How often `settle` looks at the stored clicks still undecided. */
  settlePollMs?: number;
  /** A write that landed after its click was answered as not stored; `deleted` false when a worker had claimed it. */
  onLateWrite?(id: number, deleted: boolean): void;
  /** A click arriving within this long of the previous one is part of a burst (default 50 ms). */
  burstGapMs?: number;
  /** Longest decisions are held back by a burst before they run one at a time (default 1 s). */
  maxHoldMs?: number;
  /** Milliseconds for the burst gate; Date.now by default. */
  now?: () => number;
}

/** Stored clicks remembered for `settle`; the oldest are forgotten first (decided elsewhere, most likely). */
const MAX_TRACKED = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stores clicks, several in one statement: clicks that arrive while a write is on its way go
 * together in the next one, so a burst of clicks costs a few commits, not one each, and the
 * answers that wait for them stay fast.
 */
export function createClickInbox(options: ClickInboxOptions): ClickInbox {
  const deadlineMs = options.storeDeadlineMs ?? 2_000;
  const pollMs = options.settlePollMs ?? 25;
  type Entry = { job: NewJob; kind: ClickJobKind; answered: boolean; resolve(id: number): void; reject(error: Error): void };
  let waiting: Entry[] = [];
  let writing = false;
  /** Settles when the write in progress (and its withdrawals) is over; `guard` waits for it. */
  let writeOver: Promise<void> = Promise.resolve();
  let endWrite = () => {};
  const tracked = new Map<number, ClickJobKind>();
  const now = options.now ?? Date.now;
  const burstGapMs = options.burstGapMs ?? 50;
  const maxHoldMs = options.maxHoldMs ?? 1_000;
  let lastArrivalAt = Number.NEGATIVE_INFINITY;
  /** Overlapping clicks since the last gap of `burstGapMs` (see `store`): one is a lone click, more a burst. */
  let arrivalsTogether = 0;
  let heldSince: number | null = null;

  /**
   * The clicks stored in the last `maxHoldMs`, oldest first: those still tracked are undecided here.
   * One stored longer ago and still tracked was most likely decided by another replica (tracked
   * until `settle`), or its decision is waiting on the downstream call: either way it no longer makes
   * a new click part of a burst, as the gate would have let it through by now anyway.
   */
  const recent: Array<{ id: number; at: number }> = [];
  function undecidedRecently(at: number): boolean {
    while (recent.length > 0 && recent[0]!.at <= at - maxHoldMs) recent.shift();
    return recent.some(({ id }) => tracked.has(id));
  }

  function track(id: number, kind: ClickJobKind): void {
    recent.push({ id, at: now() });
    tracked.set(id, kind);
    if (tracked.size > MAX_TRACKED) {
      const oldest = tracked.keys().next();
      if (!oldest.done) tracked.delete(oldest.value);
    }
  }

  /**
   * A click answered "not stored" whose write landed after all: taken back so it changes nothing.
   * Deleted while still queued; should a worker of this process have claimed it meanwhile, `guard`
   * skips it. (A worker of another replica claiming it in that moment would decide it: the click
   * then counts, as if stored in time, and the message shows it.)
   */
  const withdrawn = new Set<number>();
  /**
   * The clicks whose handler runs in this process now. A decision completes its click's job in its
   * own transaction, so the job is done while the execution the approval started still runs in the
   * handler: `settle` waits for that too.
   */
  const runningHere = new Set<number>();
  async function withdrawLate(id: number): Promise<void> {
    withdrawn.add(id);
    if (withdrawn.size > MAX_TRACKED) withdrawn.delete(withdrawn.values().next().value as number);
    const deleted = await options.jobs.withdraw(id).catch(() => false);
    options.onLateWrite?.(id, deleted);
  }

  async function write(): Promise<void> {
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      try {
        const ids = await options.jobs.insertMany(
          batch.map((entry) => entry.job),
          options.clock(),
        );
        const late: number[] = [];
        batch.forEach((entry, index) => {
          const id = ids[index];
          if (id === undefined) return entry.reject(new InboxUnavailable('the database returned no id'));
          if (entry.answered) return void late.push(id);
          track(id, entry.kind);
          entry.resolve(id);
        });
        // Still writing meanwhile: the burst gate lets no decision of this process start before they are gone.
        await Promise.all(late.map(withdrawLate));
      } catch (error) {
        for (const entry of batch) entry.reject(new InboxUnavailable(plainReason(error).slice(0, 200)));
      }
    }
    writing = false;
    endWrite();
  }

  return {
    store(click) {
      const at = now();
      // Clicks make a burst only while they overlap. One that arrives when every earlier click of
      // this process is written and decided starts afresh, however soon after the last: approvers
      // clicking one after another (or an agent's proposals approved in turn) are lone clicks, and
      // holding each for the gap made every such decision wait up to `burstGapMs`.
      const overlapping = writing || waiting.length > 0 || undecidedRecently(at);
      arrivalsTogether = overlapping && at - lastArrivalAt < burstGapMs ? arrivalsTogether + 1 : 1;
      lastArrivalAt = at;
      return new Promise<number>((resolve, reject) => {
        const entry: Entry = {
          job: { kind: click.kind, payload: click.payload, orderingKey: `click:${click.proposalId}`, maxAttempts: CLICK_MAX_ATTEMPTS },
          kind: click.kind,
          answered: false,
          resolve: (id) => {
            clearTimeout(timer);
            resolve(id);
          },
          reject: (error) => {
            clearTimeout(timer);
            entry.answered = true;
            reject(error);
          },
        };
        const timer = setTimeout(() => {
          entry.answered = true;
          // Not sent yet: it never will be. Sent: withdrawn if it lands (see write()).
          waiting = waiting.filter((other) => other !== entry);
          reject(new InboxUnavailable(`no answer from the database within ${deadlineMs} ms`));
        }, deadlineMs);
        waiting.push(entry);
        if (!writing) {
          // One turn of the event loop first: clicks already read from their sockets join this statement.
          writing = true;
          writeOver = new Promise((resolve) => (endWrite = resolve));
          setImmediate(() => void write());
        }
      });
    },
    wake(kind) {
      options.wake([kind]);
    },
    withdraw: (id) => options.jobs.withdraw(id),
    async settle(kind, timeoutMs) {
      const until = timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
      for (;;) {
        const ids = [...tracked].filter(([, of]) => !kind || of === kind).map(([id]) => id);
        if (ids.length === 0) return;
        const left = await options.jobs.unfinished(ids);
        for (const id of ids) if (!left.has(id) && !runningHere.has(id)) tracked.delete(id);
        if (!ids.some((id) => tracked.has(id)) || Date.now() >= until) return;
        await sleep(pollMs);
      }
    },
    settled(id) {
      tracked.delete(id);
    },
    guard(handler) {
      return async (payload, context) => {
        // A worker's claim can see a write's row before this process has read the write's answer
        // (two connections): wait until the write in progress has withdrawn what came too late.
        while (writing) await writeOver;
        if (withdrawn.has(context.jobId)) return undefined;
        runningHere.add(context.jobId);
        try {
          return await handler(payload, context);
        } finally {
          runningHere.delete(context.jobId);
        }
      };
    },
    admitDecisions({ running }) {
      const at = now();
      // A lone click is decided as soon as it is stored: no other click's answer waits on a write.
      if (!writing && (arrivalsTogether <= 1 || at - lastArrivalAt >= burstGapMs)) {
        heldSince = null;
        return true;
      }
      heldSince ??= at;
      return running === 0 && at - heldSince >= maxHoldMs;
    },
  };
}
