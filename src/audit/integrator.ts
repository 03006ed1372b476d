import { ALERT_ORIGIN, type AuditAlert } from '../core/audit-chain.js';
import type { Clock } from '../core/model.js';
import type { AuditLog, IntegratedBatch } from './ports.js';
import type { CheckpointSigner } from '../config/audit-key.js';
import type { CheckpointSink } from './sinks.js';
import type { CheckpointWitness } from './witness.js';

export interface IntegratorLog {
  warn(details: object, message?: string): void;
  error(details: object, message?: string): void;
}

export interface AuditIntegratorOptions {
  log: AuditLog;
  signer: CheckpointSigner;
  sinks: CheckpointSink[];
  /** The newest checkpoint signed so far (this process, the directory sink, the database): what the next one must continue. */
  witness: CheckpointWitness;
  /** Told of each new alert (a metric); the log line and the sinks' alerts are sent here already. */
  onAlert?: (alert: AuditAlert) => void;
  logger: () => IntegratorLog;
  clock: Clock;
  /** Only the elected replica integrates; the others stand by. */
  isLeader: () => boolean;
  /**
   * How often the leader looks for committed rows: bounds the delay before a row is in the chain
   * when nothing wakes it (default 250 ms; `twokey serve` sets 2 s, as every proposal change wakes it).
   */
  intervalMs?: number;
  /**
   * How long after a wake-up (`wake()`, a change was committed) the leader looks: the changes of that
   * moment go in one batch and one checkpoint (default 250 ms).
   */
  wakeDelayMs?: number;
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
  const wakeDelayMs = options.wakeDelayMs ?? 250;
  let wakeTimer: NodeJS.Timeout | null = null;
  const batchSize = options.batchSize ?? 1_000;
  const sinkNames = options.sinks.map((sink) => sink.name);
  const backoff = new Map<string, { until: number; failures: number }>();
  let running: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  /** The conflict last alerted on: the same one is not alerted again on every tick, a new one is. */
  let alerted: string | null = null;

  /**
   * Refuses to go on: a log line at error level, the metric, and every sink that can alert. Placing
   * stays stopped (rows keep their place in the queue, state changes go on) until the chain
   * continues the signed checkpoint again (docs/audit.md, "When the integrator refuses").
   */
  async function raiseAlert(conflict: NonNullable<IntegratedBatch['conflict']>, floor: { size: number; head: string; timestamp: string }) {
    const key = `${conflict.kind}:${floor.size}:${floor.head}:${conflict.found.size}:${conflict.found.hashAtSignedSize ?? ''}`;
    if (alerted === key) return;
    alerted = key;
    const alert = options.signer.signAlert({
      origin: ALERT_ORIGIN,
      kind: conflict.kind,
      message: conflict.message,
      signed: { size: floor.size, head: floor.head, timestamp: floor.timestamp },
      found: conflict.found,
      timestamp: options.clock().toISOString(),
    });
    options
      .logger()
      .error(
        { kind: alert.kind, signedSize: floor.size, foundSize: conflict.found.size },
        `audit integrity alert: ${conflict.message}; no checkpoint will be signed until this is resolved`,
      );
    options.onAlert?.(alert);
    for (const sink of options.sinks) {
      await sink.alert?.(alert).catch((error: unknown) => options.logger().warn({ err: error, sink: sink.name }, 'audit alert not delivered'));
    }
  }

  /** Places every row committed so far, unless the chain no longer continues what was signed; returns how many. */
  async function integrate(): Promise<number> {
    let floor = await options.witness.floor((source, error) =>
      options.logger().warn({ err: error, source }, 'could not read the newest signed audit checkpoint there'),
    );
    let total = 0;
    for (;;) {
      const batch = await options.log.integrate(batchSize, (checkpoint) => options.signer.sign(checkpoint), options.clock(), floor);
      if (batch.conflict && floor) {
        await raiseAlert(batch.conflict, floor);
        return total;
      }
      alerted = null;
      if (batch.checkpoint) {
        options.witness.remember(batch.checkpoint);
        floor = batch.checkpoint;
      }
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

  function tick(): void {
    if (running || !options.isLeader()) return;
    run().catch((error: unknown) => options.logger().warn({ err: error }, 'audit integration failed; will retry'));
  }

  return {
    /** For tests and shutdown: place and publish everything committed so far, leader or not. */
    async flush(): Promise<void> {
      await running?.catch(() => undefined);
      await run();
    },
    start(): void {
      timer = setInterval(tick, intervalMs);
      timer.unref();
    },
    /**
     * A change was committed (its audit rows with it): look within `wakeDelayMs` instead of at the
     * next poll. Wake-ups meanwhile join that look.
     */
    wake(): void {
      if (!timer || wakeTimer) return;
      wakeTimer = setTimeout(() => {
        wakeTimer = null;
        // A pass under way may have read the table before this change committed: look again after it.
        if (running) void running.catch(() => undefined).then(tick);
        else tick();
      }, wakeDelayMs);
      wakeTimer.unref();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      if (wakeTimer) clearTimeout(wakeTimer);
      wakeTimer = null;
      await running?.catch(() => undefined);
    },
    publicKey: () => options.signer.publicKey,
  };
}

export type AuditIntegrator = ReturnType<typeof createAuditIntegrator>;
