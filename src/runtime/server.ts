import type { Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';
import { startAdminSocket } from '../admin/socket.js';
import { createChatSync, type ChatSync } from '../chat/sync.js';
import type { ChatIntegration } from '../chat/types.js';
import { createChatMessageStore } from '../db/chat-store.js';
import { loadConfigFile, resolveConfigPath, type TwokeyConfig } from '../config/config-file.js';
import type { Env } from '../config/env.js';
import type { Executor } from '../core/executor.js';
import type { Clock } from '../core/model.js';
import { openDatabase, type Database } from '../db/database.js';
import { buildHttpApp } from '../http/app.js';
import { loggerOptions } from './logger.js';
import { createServices, type Services } from './services.js';

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
  /** Chat platforms to wire in; by default those the environment configures. */
  integrations?: (services: Services) => ChatIntegration[];
}

export interface RunningTwokey {
  app: FastifyInstance;
  chatSync: ChatSync;
  services: Services;
  logger: Logger;
  url: string | null;
  close(): Promise<void>;
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

  const integrations = options.integrations?.(services) ?? [];
  const chatSync = createChatSync({
    store: services.store,
    messages: createChatMessageStore(database.db),
    publishers: integrations.map((integration) => integration.publisher),
    channelFor: (operation, platform) => services.operation(operation)?.approval[platform]?.channel,
    describe: (operation) => services.operation(operation)?.description ?? operation,
    publicUrl: env.TWOKEY_PUBLIC_URL,
    clock: services.clock,
  });
  // One chain per proposal and platform keeps a message's edits in order.
  const chatChains = new Map<string, Promise<void>>();
  const unsubscribeChat = services.changes.onEvery((proposal) => {
    for (const platform of ['slack', 'discord'] as const) {
      if (!chatSync.wants(proposal, platform)) continue;
      const key = `${platform}:${proposal.id}`;
      const next = (chatChains.get(key) ?? Promise.resolve())
        .then(() => chatSync.sync(proposal.id, platform))
        .catch((error: unknown) => logger.warn({ err: error, proposalId: proposal.id, platform }, 'chat sync failed'));
      chatChains.set(key, next);
    }
  });

  const app = await buildHttpApp({
    logger,
    agents: services.agents,
    proposals: services.proposals,
    changes: services.changes,
    operations: services.operations,
    ping: () => services.store.ping(),
    metrics: services.metrics,
    rateLimit: options.rateLimit ?? { max: 600, timeWindowMs: 60_000 },
  });

  for (const integration of integrations) await integration.registerRoutes?.(app);
  for (const integration of integrations) await integration.start?.();

  let adminSocket: Server | null = null;
  let url: string | null = null;
  if (options.listen !== false) {
    url = await app.listen({ host: env.HOST, port: env.PORT });
    if (database.kind === 'pglite' && ownsDatabase) adminSocket = await startAdminSocket(services, env.TWOKEY_DATA_DIR);
  }

  // Every replica sweeps; row locks make a proposal expire once however many sweep it.
  const sweeper = setInterval(() => {
    services.proposals.expireDue().catch((error: unknown) => logger.warn({ err: error }, 'expiry sweep failed'));
  }, options.sweepIntervalMs ?? 1_000);
  sweeper.unref();

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(sweeper);
      unsubscribeChat();
      for (const integration of integrations) await integration.stop?.();
      // fastify's close waits for in-flight requests, so a commit under way finishes before the database closes.
      await app.close();
      await new Promise<void>((done) => (adminSocket ? adminSocket.close(() => done()) : done()));
      await Promise.all(chatChains.values());
      if (ownsDatabase) await database.close();
    })();
    return closing;
  };

  logger.info({ url, database: database.kind, config: config.source, operations: config.operations.length }, 'twokey started');
  return { app, chatSync, services, logger, url, close };
}
