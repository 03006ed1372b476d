import type { KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { createAuditIntegrator } from '../audit/integrator.js';
import { signerFromEnvironment, type CheckpointSigner } from '../config/audit-key.js';
import { defaultCheckpointDir, directorySink, webhookSink, type CheckpointSink } from '../audit/sinks.js';
import { createCheckpointWitness, type CheckpointWitness } from '../audit/witness.js';
import { ConfigError } from '../config/errors.js';
import { keyIdOf, publicKeyFromText } from '../core/audit-chain.js';
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
/** The audit integrator's fallback poll: every proposal change wakes it. */
const AUDIT_FALLBACK_POLL_MS = 2_000;

export interface ElectedWorkDeps {
  env: Env;
  logger: Logger;
  database: Database;
  services: Services;
  /** The checkpoint key, and the newest checkpoint signed so far (shared with the console's verdict). */
  auditTrust: { signer: CheckpointSigner; witness: CheckpointWitness };
}

/** Where the directory sink writes: `TWOKEY_AUDIT_CHECKPOINTS`, else beside the data directory. */
export const checkpointDirOf = (env: Env): string => env.TWOKEY_AUDIT_CHECKPOINTS ?? defaultCheckpointDir(env.TWOKEY_DATA_DIR);

export type AuditTrust = ElectedWorkDeps['auditTrust'];

/**
 * The checkpoint key, and the keys a checkpoint must verify with: the pinned public keys
 * (`TWOKEY_AUDIT_PUBLIC_KEY`) when there are some, else the signer's own. Pinned keys that leave out
 * the signer's stop start: every checkpoint would then fail its own check. Read before the database
 * is opened, so a bad setting costs nothing.
 */
export function auditKeysFromEnvironment(env: Env): { signer: CheckpointSigner; trustedKeys: KeyObject[] } {
  const signer = signerFromEnvironment(env);
  const pinned = env.TWOKEY_AUDIT_PUBLIC_KEY?.map(publicKeyFromText);
  if (pinned && !pinned.some((key) => keyIdOf(key) === signer.keyId)) {
    throw new ConfigError('Invalid environment:', [
      'TWOKEY_AUDIT_PUBLIC_KEY: does not include the key twokey signs checkpoints with (`twokey audit key` prints it); during a key change, pin both',
    ]);
  }
  return { signer, trustedKeys: pinned ?? [signer.publicKey] };
}

/** The signer, and the witness of the newest checkpoint it must continue (shared with the console's verdict). */
export function createAuditTrust(env: Env, keys: ReturnType<typeof auditKeysFromEnvironment>, database: Database): AuditTrust {
  const witness = createCheckpointWitness({ dir: checkpointDirOf(env), log: createAuditLog(database.db), trustedKeys: keys.trustedKeys });
  return { signer: keys.signer, witness };
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
    },
    async prune(now) {
      const counts = await pruneExpired(database.db, now, PRUNE_BATCH_SIZE);
      // Windows a day old go with the other expired rows, not on every tick: a delete a second at rest.
      await sharedRateLimits?.prune(now.getTime() - DAY_MS);
      return counts;
    },
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
  { env, logger, database, services, auditTrust }: ElectedWorkDeps,
) {
  const sinks: CheckpointSink[] = [directorySink(checkpointDirOf(env))];
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
    signer: auditTrust.signer,
    witness: auditTrust.witness,
    onAlert: (alert) => services.metrics.auditAlerts.inc({ kind: alert.kind }),
    sinks,
    logger: () => logger,
    clock: services.clock,
    isLeader: () => leader.isLeader(),
    // Every proposal change wakes the integrator (a change here at once; on PostgreSQL another
    // replica's by NOTIFY), so the poll is only the fallback for rows of other changes (an agent
    // created, a key revoked) and for a lost notification. The embedded database polled every
    // 250 ms once: a transaction of WASM PostgreSQL four times a second, most of twokey's CPU at rest.
    intervalMs: options.auditIntervalMs ?? AUDIT_FALLBACK_POLL_MS,
  });
  leader.start();
  audit.start();
  // An interval the caller chose (tests counting statements) stays the only pace.
  const stopWaking = options.auditIntervalMs === undefined ? services.changes.onAny(() => audit.wake()) : () => {};
  return { audit, leader, stopWaking };
}
