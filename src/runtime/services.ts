import { randomBytes } from 'node:crypto';
import type { OperationDefinition, TwokeyConfig } from '../config/config-file.js';
import { createAgentService } from '../core/agents.js';
import { createAuditService } from '../core/audit.js';
import type { CheckpointIndex } from '../core/audit-chain.js';
import { createChangeFeed, type ProposalSnapshot } from '../core/changes.js';
import type { Executor } from '../core/executor.js';
import type { ChatPlatformName } from '../core/jobs.js';
import type { Clock, ProposalRecord } from '../core/model.js';
import { createPeople } from '../core/people.js';
import { createProposalService } from '../core/proposals.js';
import { createRequestIdentity } from '../core/request-identity.js';
import { createGrantService } from '../core/grant-service.js';
import { createFollowUpService } from '../core/follow-ups.js';
import { identities } from '../platforms/index.js';
import { createGrantReader } from '../db/grants-store.js';
import { createEmailStore } from '../db/email-store.js';
import type { Database } from '../db/database.js';
import { createAgpRuntime, parseBusinesses, type AgpRuntime } from '../agp/index.js';
import { createAgpTokenStore } from '../db/agp-store.js';
import { createJobStore } from '../db/jobs-store.js';
import { createStore, JOBS_CHANNEL, jobsNotice } from '../db/store.js';
import { createRequestIdentityStore } from '../db/request-identity-store.js';
import { createAuditLog } from '../db/audit-log.js';
import { createConsoleSessionStore } from '../db/console-session-store.js';
import { createConsoleAuth } from '../console/sign-in.js';
import { echoExecutor } from '../executors/echo.js';
import { createAddressPolicy, staticUrlRefusal, type AddressPolicy } from '../lib/address-guard.js';
import { createHttpExecutor } from '../executors/http.js';
import { createClickInbox } from '../outbox/inbox.js';
import { openTelemetryTracer } from '../tracing/index.js';
import { createMetrics, type Metrics } from './metrics.js';
import { laneOf, type OutboxLane } from '../outbox/worker.js';
import type { JobTaker } from '../outbox/ports.js';
import { createMcpExecutor, createUpstreamClients, type UpstreamClients } from '../mcp/upstreams.js';
import { createPasskeyStore } from '../db/passkey-store.js';
import { createPasskeyService } from '../passkeys/service.js';

const EXECUTION_LEASE_MARGIN_MS = 5_000;

export interface ServicesOptions {
  database: Database;
  config: TwokeyConfig;
  clock?: Clock;
  /** Replaces the configured executors (tests inject failing or slow ones). */
  executorFor?: (operation: string) => Executor;
  /** Pending proposals per agent (TWOKEY_MAX_PENDING_PER_AGENT); unlimited when absent (the CLI). */
  maxPendingPerAgent?: number;

  /** Where agents' callbacks may go besides public addresses (`TWOKEY_CALLBACK_ALLOW`). */
  callbackAllow?: string;
  /** Clients of MCP servers (executor `mcp`, `upstreams:`); the runtime shares the one that imported the tools. */
  upstreamClients?: UpstreamClients;
  /** The outbox's lanes, for the lane label of its metrics (the worker's default lanes otherwise). */
  outboxLanes?: readonly OutboxLane[];
  /** The newest signed audit checkpoints, for the console's chain verdict (the server's witness). */
  auditCheckpoints?: () => Promise<CheckpointIndex | null>;
  /** Where a `stepUp: passkey` proposal is approved: the console's page of it, told to a chat click. */
  stepUpLink?: (proposalId: string) => string;
}

function executorOf(operation: OperationDefinition, clock: Clock, agp: AgpRuntime, upstreams: UpstreamClients): Executor {
  switch (operation.executor.type) {
    case 'echo':
      return echoExecutor;
    case 'agp':
      return agp.executor;
    case 'http':
      return createHttpExecutor({ ...operation.executor, clock });
    case 'mcp':
      return createMcpExecutor(upstreams.get(operation.executor.connection), operation.executor.tool, operation.upstreamTool?.readOnly === true);
  }
}

/** Times every executor call for /metrics without the core knowing about metrics. */
function timed(executor: Executor, operation: string, metrics: Metrics): Executor {
  // Everything else the executor says of itself (its kind, whether it only reads) carries over.
  return {
    ...executor,
    async run(request) {
      const end = metrics.executorSeconds.startTimer({ operation });
      try {
        const result = await executor.run(request);
        end({ outcome: 'ok' });
        return result;
      } catch (error) {
        end({ outcome: 'failed' });
        throw error;
      }
    },
  };
}

/** Wires the core to storage and executors: everything a transport (HTTP, CLI, chat) needs. */
export function createServices(options: ServicesOptions) {
  const clock = options.clock ?? (() => new Date());
  const replica = `r_${randomBytes(6).toString('hex')}`;
  const jobsQueued = new Set<(kinds: readonly string[], inMs?: number, key?: string | null) => void>();
  // This process's outbox, once it runs: a statement may claim a job for it (src/outbox/README.md, "Taken as queued").
  let jobTaker: JobTaker | null = null;
  const store = createStore(options.database.db, {
    replica,
    notifier: options.database.notifier,
    takeJob: (kind) => jobTaker?.(kind) ?? null,
    onJobsQueued: (kinds, inMs, key) => {
      for (const listener of jobsQueued) listener(kinds, inMs, key);
    },
  });
  const queuedHere = (kinds: readonly string[]) => {
    for (const listener of jobsQueued) listener(kinds);
  };
  const storedJobs = createJobStore(options.database.db);
  const jobs: typeof storedJobs = {
    ...storedJobs,
    // A dead job queued again (`twokey jobs retry`) runs now, here and on the other replicas, as a
    // job queued by a state change does; not at the next poll, seconds later.
    async retry(id, now) {
      const job = await storedJobs.retry(id, now);
      if (job) {
        queuedHere([job.kind]);
        void options.database.notifier?.send([[JOBS_CHANNEL, jobsNotice(replica, [job.kind])]]);
      }
      return job;
    },
  };
  // Clicks are stored outside any state change, so their wake-up comes from here, not the store.
  const inbox = createClickInbox({ jobs, clock, wake: queuedHere });
  const callbackPolicy: AddressPolicy = createAddressPolicy(options.callbackAllow);
  const operations = new Map(options.config.operations.map((operation) => [operation.name, operation]));
  const people = createPeople(options.config.people);
  const metrics = createMetrics(
    { proposalsByStatus: () => store.countProposalsByStatus(), jobsByStatus: () => jobs.countByStatus(), outboxBacklog: (now) => jobs.backlog(now) },
    { clock, laneOf: (kind) => laneOf(kind, options.outboxLanes) },
  );
  const agp = createAgpRuntime({
    businesses: parseBusinesses(options.config.businesses, options.config.operations, options.config.source),
    tokens: createAgpTokenStore(options.database.db),
    findAgentByName: (name) => store.findAgentByName(name),
    clock,
  });
  const upstreamClients = options.upstreamClients ?? createUpstreamClients();
  const executors = new Map(
    [...operations.values()].map((operation) => [operation.name, timed(executorOf(operation, clock, agp, upstreamClients), operation.name, metrics)]),
  );
  const executorFor =
    options.executorFor ??
    ((name: string) => {
      const executor = executors.get(name);
      if (!executor) throw new Error(`no executor for operation "${name}"`);
      return executor;
    });

  /**
   * Chat platforms wired in; filled by the runtime once the integrations exist. The core reads it at
   * every change to decide which messages to edit (src/core/effects.ts).
   */
  const chatPlatforms = new Set<ChatPlatformName>();

  const passkeyStore = createPasskeyStore(options.database.db);
  const changes = createChangeFeed();
  const onChange = (proposal: ProposalRecord, snapshot?: ProposalSnapshot) => {
    metrics.transitions.inc({ status: proposal.status });
    changes.publish(proposal, snapshot);
  };
  // Once per decision: a failed execution that returns the proposal to `approved` is not a second one.
  const onDecided = (proposal: ProposalRecord) => {
    if (!proposal.decidedAt) return;
    const seconds = Math.max(0, proposal.decidedAt.getTime() - proposal.createdAt.getTime()) / 1000;
    metrics.timeToDecisionSeconds.observe({ operation: proposal.operation, decision: proposal.status }, seconds);
    metrics.decisionSeconds.observe({ decision: proposal.status, operation: proposal.operation }, seconds);
  };

  const proposals = createProposalService({
    store,
    clock,
    people,
    executorFor,
    onChange,
    onDecided,
    chatPlatforms,
    callbackUrlProblem: (url) => staticUrlRefusal(url, callbackPolicy),
    maxPendingPerAgent: options.maxPendingPerAgent,
    tracer: openTelemetryTracer,
    stepUpLink: options.stepUpLink,
    operation: (name) => operations.get(name),
    // The executor's timeout ends every live call before its claim runs out.
    executionLeaseMs: (name) => {
      const executor = operations.get(name)?.executor;
      const timeoutMs =
        executor?.type === 'http'
          ? executor.timeoutMs
          : executor?.type === 'mcp'
            ? executor.connection.timeoutMs
            : executor?.type === 'agp'
              ? agp.executionTimeoutMs(name)
              : 10_000;
      return timeoutMs + EXECUTION_LEASE_MARGIN_MS;
    },
  });

  return {
    database: options.database,
    /** Names this process in the notices it sends other replicas. */
    replica,
    /** Jobs were committed by this process (the kinds; due in `inMs`, or now; a job due later with its ordering key); returns the unsubscribe function. */
    onJobsQueued(listener: (kinds: readonly string[], inMs?: number, key?: string | null) => void): () => void {
      jobsQueued.add(listener);
      return () => jobsQueued.delete(listener);
    },
    /** Lets this process's outbox take the jobs a statement claims for it (`JobTaker`); returns the undo. */
    takeJobsWith(taker: JobTaker): () => void {
      jobTaker = taker;
      return () => {
        if (jobTaker === taker) jobTaker = null;
      };
    },
    upstreamClients,
    agp,
    store,
    jobs,
    /** Clicks from chat, stored before they are answered and decided by the outbox. */
    inbox,
    clock,
    changes,
    metrics,
    chatPlatforms,
    callbackPolicy,
    operations: () => [...operations.values()],
    operation: (name: string) => operations.get(name),
    people,
    proposals,
    requests: createRequestIdentity({ proposals, store: createRequestIdentityStore(options.database.db), clock }),
    followUps: createFollowUpService({ store, clock, operation: (name) => operations.get(name), chatPlatforms, onChange }),
    grants: createGrantService({ store, clock, operation: (name) => operations.get(name), proposals, grants: createGrantReader(options.database.db) }),
    agents: createAgentService({ store, clock, knownOperations: () => [...operations.keys()], operations: () => [...operations.values()], identities }),
    audit: createAuditService(store, clock, options.auditCheckpoints),
    passkeyStore,
    /** Emailed decision links and the mails that carried them (src/email). */
    emailStore: createEmailStore(options.database.db),
    passkeys: createPasskeyService({ store: passkeyStore, clock, people }),
    auditLog: createAuditLog(options.database.db),
    consoleAuth: createConsoleAuth({ sessions: createConsoleSessionStore(options.database.db), clock }),
  };
}

export type Services = ReturnType<typeof createServices>;
