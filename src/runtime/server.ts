import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';
import { startAdminSocket } from '../admin/socket.js';
import { createAgpService, registerAgpRoutes } from '../agp/index.js';
import { createChatSync, type ChatSync } from '../chat/sync.js';
import { createWebConsole, type WebConsole } from '../console/index.js';
import { createDiscordIntegration } from '../discord/index.js';
import { createSlackIntegration, isSlackConfigured } from '../slack/index.js';
import { createIdempotencyStore } from '../db/agp-store.js';
import { applyIdempotency, createIdempotency, isIdempotentRoute, type Idempotency } from '../idempotency/index.js';
import type { ChatIntegration } from '../chat/types.js';
import { createChatMessageStore } from '../db/chat-store.js';
import { PROPOSAL_CHANNEL } from '../db/store.js';
import { createCallbackDelivery } from '../outbox/callbacks.js';
import { createOutboxWorker, type OutboxWorker } from '../outbox/worker.js';
import { loadConfigFile, resolveConfigPath, type TwokeyConfig } from '../config/config-file.js';
import type { Env } from '../config/env.js';
import type { Executor } from '../core/executor.js';
import type { Clock } from '../core/model.js';
import { openDatabase, type Database } from '../db/database.js';
import { buildHttpApp } from '../http/app.js';
import { loggerOptions } from './logger.js';
import { createServices, type Services } from './services.js';
import { createLeaderElection } from '../db/leader-election.js';

const SWEEPER_LOCK_KEY = 0x73776570; // "swep"
const DAY_MS = 24 * 3_600_000;

export interface StartOptions {
  env: Env;
  config?: TwokeyConfig;
  /** An already open database (tests share one); otherwise opened from the environment. */
  database?: Database;
  clock?: Clock;
  executorFor?: (operation: string) => Executor;
  /** Where log lines go (tests capture them); stdout by default. */
  logStream?: DestinationStream;
  /** Listen on HOST:PORT; tests use `app.inject` and skip it. */
  listen?: boolean;
  rateLimit?: { max: number; timeWindowMs: number };
  sweepIntervalMs?: number;
  outboxPollMs?: number;
  outboxLeaseMs?: number;
  outboxBackoff?: { baseMs: number; maxMs: number };
  /** Receives the console URL and a sign-in link for web:operator when no chat is configured (`serve`). */
  announceConsole?: (text: string) => void;
  /** Chat platforms to wire in; by default those the environment configures. */
  integrations?: (services: Services) => ChatIntegration[];
}

export interface RunningTwokey {
  app: FastifyInstance;
  webConsole: WebConsole;
  idempotency: Idempotency;
  chatSync: ChatSync;
  outbox: OutboxWorker;
  services: Services;
  logger: Logger;
  url: string | null;
  close(): Promise<void>;
}

/** The chat platforms the environment configures (CONTRACT §2). */
function chatFromEnvironment(env: Env, services: Services, logger: Logger): ChatIntegration[] {
  const integrations: ChatIntegration[] = [];
  if (isSlackConfigured(env)) integrations.push(createSlackIntegration({ env, services, logger }));
  if (env.DISCORD_BOT_TOKEN) integrations.push(createDiscordIntegration({ env, services, logger }));
  return integrations;
}

export function createLogger(level: string, stream?: DestinationStream): Logger {
  return stream ? pino(loggerOptions(level), stream) : pino(loggerOptions(level));
}

export async function startTwokey(options: StartOptions): Promise<RunningTwokey> {
  const { env } = options;
  const logger = createLogger(env.LOG_LEVEL, options.logStream);
  const config = options.config ?? loadConfigFile(resolveConfigPath(env), process.env);
  const ownsDatabase = !options.database;
  const database = options.database ?? (await openDatabase({ databaseUrl: env.DATABASE_URL, dataDir: env.TWOKEY_DATA_DIR }));
  const services = createServices({ database, config, clock: options.clock, executorFor: options.executorFor });

  const integrations = options.integrations?.(services) ?? chatFromEnvironment(env, services, logger);
  const chatSync = createChatSync({
    store: services.store,
    messages: createChatMessageStore(database.db),
    publishers: integrations.map((integration) => integration.publisher),
    channelFor: (operation, platform) => services.operation(operation)?.approval[platform]?.channel,
    describe: (operation) => services.operation(operation)?.description ?? operation,
    publicUrl: env.TWOKEY_PUBLIC_URL,
    clock: services.clock,
  });
  for (const integration of integrations) services.chatPlatforms.add(integration.publisher.platform);

  const outbox = createOutboxWorker({
    jobs: services.jobs,
    logger,
    clock: services.clock,
    pollIntervalMs: options.outboxPollMs,
    leaseMs: options.outboxLeaseMs,
    backoff: options.outboxBackoff,
    handlers: {
      'chat.sync': (payload) => chatSync.sync(String(payload.proposalId), payload.platform === 'discord' ? 'discord' : 'slack'),
      'callback.deliver': createCallbackDelivery({ store: services.store, clock: services.clock }),
    },
    onSettled: (job, outcome) => services.metrics.jobOutcomes.inc({ kind: job.kind, outcome }),
  });
  // A change made here has just queued jobs: run them now rather than at the next poll.
  const unsubscribeOutbox = services.changes.onEvery(() => outbox.wake());

  // On PostgreSQL a change made by any replica wakes this replica's long-polls and outbox.
  const listener = database.client
    ? await database.client.listen(PROPOSAL_CHANNEL, (proposalId) => {
        services.changes.notify(proposalId);
        outbox.wake();
      })
    : null;

  const app = await buildHttpApp({
    logger,
    agents: services.agents,
    proposals: services.proposals,
    changes: services.changes,
    operations: services.operations,
    ping: () => services.store.ping(),
    metrics: services.metrics.registry,
    rateLimit: options.rateLimit ?? { max: 600, timeWindowMs: 60_000 },
    longPollIntervalMs: database.kind === 'postgres' ? 2_000 : 250,
  });

  const rateLimit = options.rateLimit ?? { max: 600, timeWindowMs: 60_000 };
  // Idempotency-Key on every POST of /v1 and on /agp/execute (root hooks: they reach every route).
  const idempotency = createIdempotency({ store: createIdempotencyStore(database.db), clock: services.clock });
  applyIdempotency(app, idempotency, isIdempotentRoute);
  registerAgpRoutes(app, {
    agp: createAgpService({
      ...services.agp,
      proposals: services.proposals,
      clock: services.clock,
      policy: { mode: env.AGENR_EXECUTE_POLICY, maxAmountCents: env.AGENR_MAX_EXECUTE_AMOUNT },
    }),
    agents: services.agents,
    rateLimit,
    idempotency,
  });

  const webConsole = createWebConsole({ env, services });
  await webConsole.registerRoutes(app);

  for (const integration of integrations) await integration.registerRoutes?.(app);
  for (const integration of integrations) await integration.start?.();

  let adminSocket: Server | null = null;
  let url: string | null = null;
  if (options.listen !== false) {
    url = await app.listen({ host: env.HOST, port: env.PORT });
    if (database.kind === 'pglite' && ownsDatabase) adminSocket = await startAdminSocket(services, env.TWOKEY_DATA_DIR);
  }

  outbox.start();
  // The first minute: with no Slack or Discord, the console is the way to approve; say how to get in.
  if (url && integrations.length === 0 && options.announceConsole) options.announceConsole(await webConsole.firstRunSignIn(url));

  // One replica sweeps at a time (an advisory lock elects it). Row locks would keep concurrent
  // sweeps correct anyway; the election only saves the others the work.
  const sweeperLeader = createLeaderElection({ databaseUrl: database.url, key: SWEEPER_LOCK_KEY, log: () => logger, name: 'sweeper' });
  sweeperLeader.start();
  let sweeping: Promise<unknown> | null = null;
  const sweeper = setInterval(() => {
    if (sweeping || !sweeperLeader.isLeader()) return;
    sweeping = Promise.all([
      services.proposals.expireDue().catch((error: unknown) => logger.warn({ err: error }, 'expiry sweep failed')),
      services.proposals.resumeStaleExecutions().catch((error: unknown) => logger.warn({ err: error }, 'execution recovery failed')),
      services.jobs.pruneDone(new Date(services.clock().getTime() - DAY_MS)).catch(() => undefined),
      idempotency.sweep().catch(() => undefined),
      services.agp.tokens.deleteExpired(new Date(services.clock().getTime() - DAY_MS)).catch(() => undefined),
    ]).finally(() => (sweeping = null));
  }, options.sweepIntervalMs ?? 1_000);
  sweeper.unref();

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(sweeper);
      unsubscribeOutbox();
      for (const integration of integrations) await integration.stop?.();
      // fastify's close waits for in-flight requests, so a commit under way finishes before the database closes.
      await app.close();
      await new Promise<void>((done) => (adminSocket ? adminSocket.close(() => done()) : done()));
      await outbox.stop();
      await sweeping;
      await sweeperLeader.stop();
      await listener?.unlisten().catch(() => undefined);
      if (ownsDatabase) await database.close();
    })();
    return closing;
  };

  logger.info({ url, database: database.kind, config: config.source, operations: config.operations.length }, 'twokey started');
  return { app, webConsole, chatSync, outbox, idempotency, services, logger, url, close };
}
