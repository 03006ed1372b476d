import type { Clock } from '../core/model.js';
import type { AuditLog } from '../db/audit-log.js';
import type { CheckpointSigner } from './key.js';
import type { CheckpointSink } from './sinks.js';

export interface IntegratorLog {
  warn(details: object, message?: string): void;
}

export interface AuditIntegratorOptions {
  log: AuditLog;
  signer: CheckpointSigner;
  sinks: CheckpointSink[];
  logger: () => IntegratorLog;
  clock: Clock;
  /** Only the elected replica integrates; the others stand by. */
  isLeader: () => boolean;
  /** How often the leader looks for committed rows: bounds the delay before a row is in the chain. */
  intervalMs?: number;
  batchSize?: number;
}

const MAX_SINK_BACKOFF_MS = 60_000;

/**
 * Places committed audit rows in the chain, signs a checkpoint per batch, and publishes checkpoints
 * to every sink outside the database. Runs on the elected replica; a replica that dies mid-way
 * leaves rows unplaced or checkpoints unpublished, and the next leader carries on from the table.
 */
export function createAuditIntegrator(options: AuditIntegratorOptions) {
  const intervalMs = options.intervalMs ?? 250;
  const batchSize = options.batchSize ?? 1_000;
  const sinkNames = options.sinks.map((sink) => sink.name);
  const backoff = new Map<string, { until: number; failures: number }>();
  let running: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;

  /** Places every row committed so far; returns how many. */
  async function integrate(): Promise<number> {
    let total = 0;
    for (;;) {
      const batch = await options.log.integrate(batchSize, (checkpoint) => options.signer.sign(checkpoint), options.clock());
      total += batch.rows;
      if (batch.rows < batchSize) return total;
    }
  }

  /** Hands every checkpoint to each sink that lacks it, in order; a failing sink backs off alone. */
  async function publish(): Promise<void> {
    for (;;) {
      const pending = await options.log.unpublished(sinkNames, 100);
      if (pending.length === 0) return;
      let progressed = false;
      for (const sink of options.sinks) {
        const now = Date.now();
        const state = backoff.get(sink.name);
        if (state && state.until > now) continue;
        for (const stored of pending) {
          if (stored.publishedTo.includes(sink.name)) continue;
          try {
            await sink.publish(stored.checkpoint);
          } catch (error) {
            const failures = (state?.failures ?? 0) + 1;
            backoff.set(sink.name, { failures, until: now + Math.min(250 * 2 ** failures, MAX_SINK_BACKOFF_MS) });
            options.logger().warn({ err: error, sink: sink.name, size: stored.size }, 'audit checkpoint not published; will retry');
            break;
          }
          backoff.delete(sink.name);
          await options.log.markPublished(stored.size, sink.name, sinkNames);
          progressed = true;
        }
      }
      if (!progressed) return;
    }
  }

  /** One pass: place what is committed, then publish. Single-flight: a second caller joins the first. */
  function run(): Promise<void> {
    running ??= (async () => {
      try {
        if (await options.log.hasPending()) await integrate();
        await publish();
      } finally {
        running = null;
      }
    })();
    return running;
  }

  return {
    /** For tests and shutdown: place and publish everything committed so far, leader or not. */
    async flush(): Promise<void> {
      await running?.catch(() => undefined);
      await run();
    },
    start(): void {
      timer = setInterval(() => {
        if (running || !options.isLeader()) return;
        run().catch((error: unknown) => options.logger().warn({ err: error }, 'audit integration failed; will retry'));
      }, intervalMs);
      timer.unref();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      await running?.catch(() => undefined);
    },
    publicKey: () => options.signer.publicKey,
  };
}

export type AuditIntegrator = ReturnType<typeof createAuditIntegrator>;
