import type { Logger } from 'pino';
import { createAuditIntegrator } from '../audit/integrator.js';
import type { CheckpointSigner } from '../audit/key.js';
import { defaultCheckpointDir, directorySink, webhookSink, type CheckpointSink } from '../audit/sinks.js';
import type { Env } from '../config/env.js';
import { createAuditLog } from '../db/audit-log.js';
import type { Database } from '../db/database.js';
import { createLeaderElection } from '../db/leader-election.js';
import type { SharedRateLimitStore } from '../db/rate-limit-store.js';
import { pruneExpired } from '../db/retention.js';
import type { Services } from './services.js';
import { createSweeper } from './sweeper.js';

/*
 * The background work that one replica does for the fleet, each elected by its own advisory lock:
 * the sweeper and the audit integrator.
 */

const SWEEPER_LOCK_KEY = 0x73776570; // "swep"
const PRUNE_BATCH_SIZE = 500;
const AUDIT_LEADER_LOCK_KEY = 0x6175646c; // "audl"
const DAY_MS = 24 * 3_600_000;

export interface ElectedWorkDeps {
  env: Env;
  logger: Logger;
  database: Database;
  services: Services;
}

/**
 * One replica sweeps at a time (an advisory lock elects it). Row locks would keep concurrent
 * sweeps correct anyway; the election only saves the others the work.
 */
export function startSweeper(
  options: { sweepIntervalMs?: number; pruneIntervalMs?: number },
  { logger, database, services }: ElectedWorkDeps,
  sharedRateLimits: SharedRateLimitStore | null,
) {
  const leader = createLeaderElection({ databaseUrl: database.url, key: SWEEPER_LOCK_KEY, log: () => logger, name: 'sweeper' });
  leader.start();
  const sweeper = createSweeper({
    clock: services.clock,
    logger,
    isLeader: () => leader.isLeader(),
    tasks: {
      expiry: () => services.proposals.expireDue(),
      'execution recovery': () => services.proposals.resumeStaleExecutions(),
      ...(sharedRateLimits ? { 'rate-limit window pruning': () => sharedRateLimits.prune(services.clock().getTime() - DAY_MS) } : {}),
    },
    prune: (now) => pruneExpired(database.db, now, PRUNE_BATCH_SIZE),
    pruneBatchSize: PRUNE_BATCH_SIZE,
    pruneEveryMs: options.pruneIntervalMs ?? 10 * 60_000,
  });
  const timer = setInterval(() => void sweeper.tick(), options.sweepIntervalMs ?? 1_000);
  timer.unref();
  return { sweeper, leader, timer };
}

/** Audit rows are placed in the chain off the hot path, by one replica at a time (docs/audit.md). */
export function startAuditIntegrator(
  options: { auditLeaderRetryMs?: number; auditIntervalMs?: number },
  { env, logger, database, services }: ElectedWorkDeps,
  /** Made before anything listens (`signerFromEnvironment`): a bad key stops start. */
  signer: CheckpointSigner,
) {
  const sinks: CheckpointSink[] = [directorySink(env.TWOKEY_AUDIT_CHECKPOINTS ?? defaultCheckpointDir(env.TWOKEY_DATA_DIR))];
  if (env.TWOKEY_AUDIT_WEBHOOK_URL) sinks.push(webhookSink(env.TWOKEY_AUDIT_WEBHOOK_URL));
  const leader = createLeaderElection({
    databaseUrl: database.url,
    key: AUDIT_LEADER_LOCK_KEY,
    log: () => logger,
    name: 'audit integrator',
    retryMs: options.auditLeaderRetryMs,
  });
  const audit = createAuditIntegrator({
    log: createAuditLog(database.db),
    signer,
    sinks,
    logger: () => logger,
    clock: services.clock,
    isLeader: () => leader.isLeader(),
    intervalMs: options.auditIntervalMs,
  });
  leader.start();
  audit.start();
  return { audit, leader };
}
