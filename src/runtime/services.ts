import type { OperationDefinition, TwokeyConfig } from '../config/config-file.js';
import { createAgentService } from '../core/agents.js';
import { createAuditService } from '../core/audit.js';
import { createChangeFeed } from '../core/changes.js';
import type { Executor } from '../core/executor.js';
import { finalStatuses, type Clock, type ProposalRecord } from '../core/model.js';
import type { OutboxJobSpec } from '../core/ports.js';
import { createProposalService } from '../core/proposals.js';
import type { Database } from '../db/database.js';
import { createAgpRuntime, parseBusinesses, type AgpRuntime } from '../agp/index.js';
import { createAgpTokenStore } from '../db/agp-store.js';
import { createJobStore } from '../db/jobs-store.js';
import { createStore } from '../db/store.js';
import { echoExecutor } from '../executors/echo.js';
import { createHttpExecutor } from '../executors/http.js';
import { createMetrics, type Metrics } from './metrics.js';

export type ChatPlatform = 'slack' | 'discord';

const EXECUTION_LEASE_MARGIN_MS = 5_000;

export interface ServicesOptions {
  database: Database;
  config: TwokeyConfig;
  clock?: Clock;
  /** Replaces the configured executors (tests inject failing or slow ones). */
  executorFor?: (operation: string) => Executor;

}

function executorOf(operation: OperationDefinition, clock: Clock, agp: AgpRuntime): Executor {
  switch (operation.executor.type) {
    case 'echo':
      return echoExecutor;
    case 'agp':
      return agp.executor;
    case 'http':
      return createHttpExecutor({ ...operation.executor, clock });
  }
}

/** Times every executor call for /metrics without the core knowing about metrics. */
function timed(executor: Executor, operation: string, metrics: Metrics): Executor {
  return {
    kind: executor.kind,
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
  const store = createStore(options.database.db);
  const jobs = createJobStore(options.database.db);
  const operations = new Map(options.config.operations.map((operation) => [operation.name, operation]));
  const metrics = createMetrics({ proposalsByStatus: () => store.countProposalsByStatus(), jobsByStatus: () => jobs.countByStatus() });
  const agp = createAgpRuntime({
    businesses: parseBusinesses(options.config.businesses, options.config.operations, options.config.source),
    tokens: createAgpTokenStore(options.database.db),
    findAgentByName: (name) => store.findAgentByName(name),
    clock,
  });
  const executors = new Map([...operations.values()].map((operation) => [operation.name, timed(executorOf(operation, clock, agp), operation.name, metrics)]));
  const executorFor =
    options.executorFor ??
    ((name: string) => {
      const executor = executors.get(name);
      if (!executor) throw new Error(`no executor for operation "${name}"`);
      return executor;
    });

  /** Chat platforms wired in; filled by the runtime once the integrations exist. */
  const chatPlatforms = new Set<ChatPlatform>();

  /** What must reach the outside after a proposal changes, queued in the same transaction. */
  function effects(proposal: ProposalRecord): OutboxJobSpec[] {
    const approval = operations.get(proposal.operation)?.approval;
    const jobsToQueue: OutboxJobSpec[] = [...chatPlatforms]
      .filter((platform) => approval?.[platform]?.channel)
      .map((platform) => ({ kind: 'chat.sync', payload: { proposalId: proposal.id, platform }, orderingKey: `chat:${platform}:${proposal.id}`, coalesce: true }));
    if (proposal.callbackUrl && finalStatuses.includes(proposal.status)) {
      jobsToQueue.push({ kind: 'callback.deliver', payload: { proposalId: proposal.id, status: proposal.status }, orderingKey: `callback:${proposal.id}` });
    }
    return jobsToQueue;
  }

  const changes = createChangeFeed();
  const onChange = (proposal: ProposalRecord) => {
    metrics.transitions.inc({ status: proposal.status });
    if (proposal.decidedAt && ['approved', 'rejected', 'expired', 'cancelled'].includes(proposal.status)) {
      metrics.decisionSeconds.observe({ decision: proposal.status }, (proposal.decidedAt.getTime() - proposal.createdAt.getTime()) / 1000);
    }
    changes.publish(proposal);
  };

  return {
    database: options.database,
    agp,
    store,
    jobs,
    clock,
    changes,
    metrics,
    chatPlatforms,
    operations: () => [...operations.values()],
    operation: (name: string) => operations.get(name),
    proposals: createProposalService({
      store,
      clock,
      executorFor,
      onChange,
      effects,
      operation: (name) => operations.get(name),
      // The executor's timeout ends every live call before its claim runs out.
      executionLeaseMs: (name) => {
        const executor = operations.get(name)?.executor;
        const timeoutMs = executor?.type === 'http' ? executor.timeoutMs : executor?.type === 'agp' ? agp.executionTimeoutMs(name) : 10_000;
        return timeoutMs + EXECUTION_LEASE_MARGIN_MS;
      },
    }),
    agents: createAgentService({ store, clock, knownOperations: () => [...operations.keys()] }),
    audit: createAuditService(store, clock),
  };
}

export type Services = ReturnType<typeof createServices>;
