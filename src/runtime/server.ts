import type { Server } from 'node:http';
import type { Agent } from 'undici';
import type { FastifyInstance } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';
import { startAdminSocket } from '../admin/socket.js';
import { createFailedAuthLimiter, createLongPollLimiter, type FailedAuthLimiter } from '../limits/index.js';
import { createAgpService, registerAgpRoutes } from '../agp/index.js';
import type { OpenExecuteRecord } from '../agp/ports.js';
import { createChatSync, type ChatSync } from '../chat/sync.js';
import { consoleUrl, createWebConsole, publicBaseUrl, type WebConsole } from '../console/index.js';
import { consoleStoresFor } from './console-stores.js';
import { createLeaderElection } from '../db/leader-election.js';
import { chatFromEnvironment, type ChatWiring } from './integrations.js';
import { createIdempotencyStore } from '../db/agp-store.js';
import { applyIdempotency, createIdempotency, isIdempotentRoute, type Idempotency } from '../idempotency/index.js';
import type { ChatIntegration } from '../chat/types.js';
import { createChatMessageStore } from '../db/chat-store.js';
import { createCallbackDelivery } from '../outbox/callbacks.js';
import { createOutboxWorker, defaultLanes, type OutboxLane, type OutboxWorker } from '../outbox/worker.js';
import { clickLane, type ClickJobKind } from '../outbox/inbox.js';
import { createCallbackStore } from '../db/callback-store.js';
import { createGuardedAgent } from '../lib/address-guard.js';
import type { Sweeper } from './sweeper.js';
import type { AuditIntegrator } from '../audit/integrator.js';
import { auditKeysFromEnvironment, createAuditTrust, startAuditIntegrator, startSweeper, type AuditTrust } from './elected-work.js';
import { loadConfigFile, resolveConfigPath, type TwokeyConfig } from '../config/config-file.js';
import type { Env } from '../config/env.js';
import type { Executor } from '../core/executor.js';
import type { Clock } from '../core/model.js';
import { openDatabase, type Database } from '../db/database.js';
import type { heldStorageLog } from '../db/embedded-storage.js';
import { buildHttpApp } from '../http/app.js';
import { registerResumeStateRoutes } from '../http/resume-state-routes.js';
import { createResumeStateStore } from '../db/resume-state-store.js';
import { loggerOptions } from './logger.js';
import { chatConcurrencyFor } from './concurrency.js';
import { wakeOnChanges } from './wake-ups.js';
import { createServices, type Services } from './services.js';
import type { JobHandlers } from '../core/jobs.js';
import { destinationOf } from '../core/chat-platform.js';
import { chatPlatformLabels } from '../platforms/index.js';
import { createSharedRateLimitStore, type SharedRateLimitStore } from '../db/rate-limit-store.js';
import { createUpstreamClients, ungatedUpstreamTools, withUpstreamOperations, type UpstreamClients } from '../mcp/upstreams.js';
import { registerMcpRoutes } from '../mcp/http-route.js';
import type { McpCalls } from '../mcp/calls.js';
import { createMcpStore } from '../db/mcp-store.js';

export interface StartOptions {
  env: Env;
  config?: TwokeyConfig;
  /** An already open database (tests share one); otherwise opened from the environment. */
  database?: Database;
  /**
   * The database this process opens for itself, already under way (`serve` starts it while the server's
   * modules load): owned and closed like one opened here. Its storage log is attached to the logger.
   */
  openingDatabase?: { database: Promise<Database>; log: ReturnType<typeof heldStorageLog> };
  clock?: Clock;
  executorFor?: (operation: string) => Executor;
  /** Where log lines go (tests capture them); stdout by default. */
  logStream?: DestinationStream;
  /** Listen on HOST:PORT; tests use `app.inject` and skip it. */
  listen?: boolean;
  rateLimit?: { max: number; timeWindowMs: number };
  sweepIntervalMs?: number;
  /** How often a long-poll re-reads its proposal when no change wakes it (default 2 s on PostgreSQL, 250 ms embedded). */
  longPollIntervalMs?: number;
  outboxPollMs?: number;
  outboxLeaseMs?: number;
  outboxBackoff?: { baseMs: number; maxMs: number };
  outboxLanes?: readonly OutboxLane[];
  /** How long one outbox job may run (default 30 s, or half a shorter lease). */
  outboxHandlerDeadlineMs?: number;
  /** How long a callback waits for its receiver's answer (default `TWOKEY_CALLBACK_TIMEOUT`, 5 s). */
  callbackTimeoutMs?: number;
  /** How often the sweeper prunes expired rows, by the clock (default 10 minutes). */
  pruneIntervalMs?: number;
  /** How often the elected replica looks for audit rows to place in the chain when no change woke it (2 s). */
  auditIntervalMs?: number;
  auditLeaderRetryMs?: number;
  /**
   * Receives the console URL and a sign-in link for web:operator when no chat is configured: set only
   * when a person's terminal will show it (`serve` on a TTY). Without it, the log says how to get a link.
   */
  announceConsole?: (text: string) => void;
  /** Chat platforms to wire in; by default those the environment configures. */
  integrations?: (services: Services, wiring: ChatWiring) => ChatIntegration[];
}

export interface RunningTwokey {
  app: FastifyInstance;
  webConsole: WebConsole;
  idempotency: Idempotency<OpenExecuteRecord>;
  chatSync: ChatSync;
  outbox: OutboxWorker;
  sweeper: Sweeper;
  audit: AuditIntegrator;
  services: Services;
  /** The MCP server's tool calls (POST /mcp). */
  mcp: McpCalls;
  logger: Logger;
  url: string | null;
  close(): Promise<void>;
}

export type { ChatWiring } from './integrations.js';

export function createLogger(level: string, stream?: DestinationStream): Logger {
  // stdout written asynchronously (pino flushes it at exit): a log line never blocks the event loop.
  return pino(loggerOptions(level), stream ?? pino.destination({ dest: 1, sync: false }));
}

/** Upstream tools that run with no human are the operator's choice: say at every start which they are. */
function announceUngatedTools(config: TwokeyConfig, logger: Logger): void {
  if (config.upstreams.length === 0) return;
  const ungated = ungatedUpstreamTools(config);
  if (ungated.length === 0) logger.info('every imported upstream tool needs approval');
  else logger.warn({ ungated }, `${ungated.length} upstream tool(s) run without approval: ${ungated.map((tool) => tool.operation).join(', ')}`);
}

/** What every later phase of start-up builds on. */
interface Foundation {
  env: Env;
  logger: Logger;
  config: TwokeyConfig;
  database: Database;
  /** false when the caller passed the database in (tests share one): the caller closes it. */
  ownsDatabase: boolean;
  upstreamClients: UpstreamClients;
  services: Services;
  auditTrust: AuditTrust;
}

/** The configuration, with the MCP upstreams' tools as operations, and the database and services it runs on. */
async function openFoundation(options: StartOptions, logger: Logger): Promise<Foundation> {
  const { env } = options;
  // First: a bad key setting stops start before anything is opened.
  const auditKeys = auditKeysFromEnvironment(env);
  const upstreamClients = createUpstreamClients();
  // MCP upstreams' tools become operations before anything else reads the configuration.
  const storageLog = logger.child({ component: 'storage' });
  const opening = options.database ? undefined : options.openingDatabase;
  opening?.log.attach(storageLog);
  const config = await Promise.resolve()
    .then(() => withUpstreamOperations(options.config ?? loadConfigFile(resolveConfigPath(env), process.env), upstreamClients))
    .catch(async (error: unknown) => {
      await upstreamClients.closeAll();
      await opening?.database.then(
        (database) => database.close(),
        () => undefined,
      );
      throw error;
    });
  const ownsDatabase = !options.database;
  const database =
    options.database ??
    (await (opening?.database ??
      openDatabase({
        databaseUrl: env.DATABASE_URL,
        dataDir: env.TWOKEY_DATA_DIR,
        storage: { minFreeBytes: env.TWOKEY_MIN_FREE_DISK_MB * 1024 * 1024, log: storageLog },
      })));
  const auditTrust = createAuditTrust(env, auditKeys, database);
  const services = createServices({
    database,
    config,
    clock: options.clock,
    executorFor: options.executorFor,
    callbackAllow: env.TWOKEY_CALLBACK_ALLOW,
    upstreamClients,
    maxPendingPerAgent: env.TWOKEY_MAX_PENDING_PER_AGENT,
    outboxLanes: options.outboxLanes,
    auditCheckpoints: () => auditTrust.witness.index(),
    stepUpLink: (proposalId) => new URL(`/console/proposals/${encodeURIComponent(proposalId)}`, publicBaseUrl(env)).toString(),
  });
  return { env, logger, config, database, ownsDatabase, upstreamClients, services, auditTrust };
}

type WiredChat = Awaited<ReturnType<typeof wireChat>>;

/** The chat platforms, and the sync that keeps their messages in step with the proposals. */
async function wireChat(
  options: StartOptions,
  { env, logger, database, services }: Foundation,
): Promise<{ integrations: ChatIntegration[]; chatSync: ChatSync }> {
  const databaseUrl = database.kind === 'postgres' ? database.url : undefined;
  const chatWiring: ChatWiring = { concurrency: chatConcurrencyFor(database.kind), elect: (work) => createLeaderElection({ ...work, databaseUrl }) };
  const integrations = options.integrations?.(services, chatWiring) ?? (await chatFromEnvironment(env, services, chatWiring, logger));
  const chatSync = createChatSync({
    store: services.store,
    messages: createChatMessageStore(database.db),
    publishers: integrations.map((integration) => integration.publisher),
    channelFor: (operation, platform) => destinationOf(services.operation(operation)?.approval, platform) ?? undefined,
    describe: (operation) => services.operation(operation)?.description ?? operation,
    grantDurations: (operation) => {
      const grants = services.operation(operation)?.grants;
      return grants?.allow ? grants.durationsMs : [];
    },
    resultSettings: (operation) => {
      const definition = services.operation(operation);
      return { template: definition?.renderResult, json: definition?.chatResult === 'json' };
    },
    publicUrl: env.TWOKEY_PUBLIC_URL,
    clock: services.clock,
  });
  for (const integration of integrations) services.chatPlatforms.add(integration.publisher.platform);
  return { integrations, chatSync };
}

/** The outbox worker with a handler for every job kind the core, the chat sync and the chat platforms queue. */
function createOutbox(
  options: StartOptions,
  { logger, database, services }: Foundation,
  { chatSync, integrations }: WiredChat,
  callbackAgent: () => Agent,
): OutboxWorker {
  const coreHandlers: Omit<JobHandlers, ClickJobKind> = {
    'chat.sync': ({ proposalId, platform }, { known }) => chatSync.sync(proposalId, platform, known),
    'callback.deliver': createCallbackDelivery({
      store: services.store,
      callbacks: createCallbackStore(database.db),
      dispatcher: callbackAgent,
      clock: services.clock,
      timeoutMs: options.callbackTimeoutMs ?? options.env.TWOKEY_CALLBACK_TIMEOUT * 1000,
    }),
    'proposal.remind': async ({ proposalId, index }) => void (await services.followUps.remind(proposalId, index)),
    'proposal.escalate': async ({ proposalId }) => void (await services.followUps.escalate(proposalId)),
    'chat.followup': (payload) => chatSync.followUp(payload),
  };
  return createOutboxWorker({
    jobs: services.jobs,
    logger,
    clock: services.clock,
    // On PostgreSQL every job queued now wakes its lanes (here at once, on other replicas by NOTIFY), and a
    // job put back for a retry wakes its lane when it falls due: the poll is the slow fallback, for a
    // lost notification, a reminder falling due, or a job queued by hand in the database:
    // every 2 s. The same on the embedded database, where the jobs this process queues wake their
    // lanes at once and the poll finds the rest (its 250 ms poll was most of twokey's CPU at rest there).
    pollIntervalMs: options.outboxPollMs ?? 2_000,
    leaseMs: options.outboxLeaseMs,
    backoff: options.outboxBackoff,
    // Stored clicks wait out a burst of clicks: their answers wait for the clicks' writes (see inbox.ts).
    lanes: options.outboxLanes ?? [
      clickLane(chatConcurrencyFor(database.kind).clickDecisions, services.inbox.admitDecisions),
      ...defaultLanes(options.env.TWOKEY_CALLBACK_CONCURRENCY_PER_AGENT),
    ],
    handlerDeadlineMs: options.outboxHandlerDeadlineMs,
    // Every kind of the job catalogue has its handler here, but the stored clicks: those come from
    // their platform's integration, and a click of a platform not wired in is buried.
    handlers: { ...coreHandlers, ...Object.assign({}, ...integrations.map((integration) => integration.jobHandlers ?? {})) },
    onSettled: (job, outcome) => {
      services.metrics.jobOutcomes.inc({ kind: job.kind, outcome });
      if (outcome === 'done' || outcome === 'dead') services.inbox.settled(job.id);
    },
  });
}

/** The limits every agent-facing route shares. */
interface AgentLimits {
  rateLimit: { max: number; timeWindowMs: number };
  failedAuth: FailedAuthLimiter;
  /** On PostgreSQL every replica counts against one limit per key (leased in blocks, so most requests cost no round trip). */
  sharedRateLimits: SharedRateLimitStore | null;
  longPollIntervalMs: number;
}

function agentLimits(options: StartOptions, { database, services }: Foundation): AgentLimits {
  return {
    rateLimit: options.rateLimit ?? { max: 600, timeWindowMs: 60_000 },
    failedAuth: createFailedAuthLimiter({
      max: options.env.TWOKEY_MAX_FAILED_AUTH_PER_MINUTE,
      windowMs: 60_000,
      clock: services.clock,
    }),
    sharedRateLimits: database.kind === 'postgres' ? createSharedRateLimitStore({ db: database.db, now: () => services.clock().getTime() }) : null,
    // Long-polls wake on the change feed; the interval is the fallback re-read (on PostgreSQL it covers
    // a lost NOTIFY; on the embedded database, a second service instance on the same database).
    longPollIntervalMs: options.longPollIntervalMs ?? (database.kind === 'postgres' ? 2_000 : 250),
  };
}

/** The HTTP app with the /v1 API, and Idempotency-Key on every POST of /v1 and on /agp/execute. */
async function createApp({ env, logger, database, services }: Foundation, limits: AgentLimits) {
  const app = await buildHttpApp({
    logger,
    trustProxy: env.TWOKEY_TRUST_PROXY,
    rateLimitStore: limits.sharedRateLimits?.Store,
    agents: services.agents,
    proposals: services.proposals,
    requests: services.requests,
    changes: services.changes,
    operations: services.operations,
    ping: () => services.store.probeWrite(),
    storageProblem: database.storageProblem,
    metrics: services.metrics.registry,
    requestMetrics: services.metrics,
    rateLimit: limits.rateLimit,
    longPollIntervalMs: limits.longPollIntervalMs,
    longPolls: createLongPollLimiter(env.TWOKEY_MAX_LONG_POLLS_PER_AGENT),
    failedAuth: limits.failedAuth,
  });
  // Registered here only: root hooks reach every route, in any plugin, whenever it is added.
  const idempotency = createIdempotency({
    store: createIdempotencyStore(database.db),
    clock: services.clock,
    maxStoredResponseBytes: env.TWOKEY_IDEMPOTENCY_MAX_RESPONSE_BYTES,
  });
  applyIdempotency(app, idempotency, isIdempotentRoute);
  return { app, idempotency };
}

/** The other dialects and surfaces on the app: AGP, resume states, the web console, MCP, the chat platforms. */
async function registerSurfaces(
  app: FastifyInstance,
  foundation: Foundation,
  limits: AgentLimits,
  integrations: readonly ChatIntegration[],
  idempotency: Idempotency<OpenExecuteRecord>,
  /** Known once the app listens, after the routes are registered. */
  listeningUrl: () => string | null,
) {
  const { env, database, services } = foundation;
  const { rateLimit, failedAuth } = limits;
  registerAgpRoutes(app, {
    agp: createAgpService({
      ...services.agp,
      proposals: services.proposals,
      clock: services.clock,
      policy: { mode: env.AGENR_EXECUTE_POLICY, maxAmountCents: env.AGENR_MAX_EXECUTE_AMOUNT },
    }),
    agents: services.agents,
    rateLimit,
    failedAuth,
    idempotency,
  });
  registerResumeStateRoutes(app, {
    agents: services.agents,
    proposals: services.proposals,
    resumeStates: createResumeStateStore(database.db),
    clock: services.clock,
    rateLimit,
    failedAuth,
  });

  const webConsole = createWebConsole({ env, services, stores: consoleStoresFor(database), signIn: foundation.config.console, listenUrl: listeningUrl });
  await webConsole.registerRoutes(app);

  const mcp = registerMcpRoutes(app, {
    agents: services.agents,
    proposals: services.proposals,
    requests: services.requests,
    changes: services.changes,
    store: createMcpStore(database.db),
    operations: services.operations,
    operation: services.operation,
    clock: services.clock,
    waitMs: env.TWOKEY_MCP_WAIT * 1000,
    longPollIntervalMs: limits.longPollIntervalMs,
    consoleBase: () => publicBaseUrl(env, listeningUrl()),
    rateLimit,
    countToolCall: (tool, outcome) => services.metrics.mcpToolCalls.inc({ tool, outcome }),
    failedAuth,
  });

  for (const integration of integrations) await integration.registerRoutes?.(app);
  return { webConsole, mcp };
}

export async function startTwokey(options: StartOptions): Promise<RunningTwokey> {
  const { env } = options;
  const logger = createLogger(env.LOG_LEVEL, options.logStream);
  const foundation = await openFoundation(options, logger);
  const { config, database, services } = foundation;
  // Agents choose callback URLs: every connection they cause goes through the address guard, made
  // with the first callback (it loads undici, a hundred modules, which nothing before /readyz needs).
  let guardedAgent: Agent | null = null;
  const callbackAgent = () => (guardedAgent ??= createGuardedAgent(services.callbackPolicy));
  const { integrations, chatSync } = await wireChat(options, foundation);
  const outbox = createOutbox(options, foundation, { chatSync, integrations }, callbackAgent);
  const wake = await wakeOnChanges(foundation, outbox);

  const limits = agentLimits(options, foundation);
  const { app, idempotency } = await createApp(foundation, limits);
  let url: string | null = null;
  const { webConsole, mcp } = await registerSurfaces(app, foundation, limits, integrations, idempotency, () => url);
  for (const integration of integrations) await integration.start?.();

  let adminSocket: Server | null = null;
  if (options.listen !== false) {
    url = await app.listen({ host: env.HOST, port: env.PORT });
    const listening = url;
    if (database.kind === 'pglite' && foundation.ownsDatabase) {
      adminSocket = await startAdminSocket(services, env.TWOKEY_DATA_DIR, { publicBaseUrl: () => publicBaseUrl(env, listening) });
    }
  }

  // The embedded database is this process's alone (it locks its directory): a claim left is a dead process's (a stored click).
  if (database.kind === 'pglite' && foundation.ownsDatabase) {
    // A disk short of space refuses this write: start anyway, and the claims end with their leases.
    const released = await services.jobs.releaseAllClaims(services.clock()).catch((error: unknown) => {
      logger.warn({ err: error }, 'outbox jobs claimed by a process that died run again when their leases end');
      return 0;
    });
    if (released > 0) logger.info('outbox jobs claimed by a process that died run again now');
  }
  outbox.start();
  // Started, it may take jobs a statement claims for it: a new proposal's first post, a result's waiting edit (src/outbox/README.md).
  const stopTakingJobs = services.takeJobsWith(outbox.takeJob);
  // The first minute: with no chat platform, the console is the way to approve; say how to get in.
  // A sign-in link goes to a terminal only: the log stream is collected, kept and read by others.
  if (url && integrations.length === 0) {
    if (options.announceConsole) options.announceConsole(await webConsole.firstRunSignIn(url));
    else
      logger.info(
        { console: consoleUrl(publicBaseUrl(env, url)) },
        `no ${chatPlatformLabels} configured: approve in the web console; run \`twokey approvers link NAME\` for a sign-in link`,
      );
  }

  const sweeping = startSweeper(options, foundation, limits.sharedRateLimits);
  const { audit, leader: auditLeader, stopWaking: stopWakingAudit } = startAuditIntegrator(options, foundation);

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(sweeping.timer);
      wake.unsubscribeOutbox();
      // From here jobs are queued, and claimed while the outbox runs: none is left claimed by a stopped one.
      stopTakingJobs();
      stopWakingAudit();
      for (const integration of integrations) await integration.stop?.();
      // fastify's close waits for in-flight requests, so a commit under way finishes before the database closes.
      await app.close();
      await new Promise<void>((done) => (adminSocket ? adminSocket.close(() => done()) : done()));
      await outbox.stop();
      await sweeping.sweeper.idle();
      await sweeping.leader.stop();
      await guardedAgent?.close();
      // The leader places what is committed before it goes; a replica that dies leaves it to the next.
      await audit.stop();
      if (auditLeader.isLeader()) await audit.flush().catch((error: unknown) => logger.warn({ err: error }, 'audit integration failed at shutdown'));
      await auditLeader.stop();
      await wake.unlisten();
      await foundation.upstreamClients.closeAll();
      if (foundation.ownsDatabase) await database.close();
    })();
    return closing;
  };

  logger.info({ url, database: database.kind, config: config.source, operations: config.operations.length }, 'twokey started');
  announceUngatedTools(config, logger);
  return { app, webConsole, chatSync, outbox, sweeper: sweeping.sweeper, audit, idempotency, services, mcp, logger, url, close };
}
