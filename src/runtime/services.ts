import { Registry, collectDefaultMetrics, Counter } from 'prom-client';
import type { OperationDefinition, TwokeyConfig } from '../config/config-file.js';
import { createAgentService } from '../core/agents.js';
import { createAuditService } from '../core/audit.js';
import { createChangeFeed } from '../core/changes.js';
import type { Executor } from '../core/executor.js';
import type { Clock, ProposalRecord } from '../core/model.js';
import { createProposalService } from '../core/proposals.js';
import type { Database } from '../db/database.js';
import { createStore } from '../db/store.js';
import { echoExecutor } from '../executors/echo.js';
import { createHttpExecutor } from '../executors/http.js';

export interface ServicesOptions {
  database: Database;
  config: TwokeyConfig;
  clock?: Clock;
  /** Replaces the configured executors (tests inject failing or slow ones). */
  executorFor?: (operation: string) => Executor;
}

function executorOf(operation: OperationDefinition, clock: Clock): Executor {
  if (operation.executor.type === 'echo') return echoExecutor;
  return createHttpExecutor({ ...operation.executor, clock });
}

/** Wires the core to storage and executors: everything a transport (HTTP, CLI, chat) needs. */
export function createServices(options: ServicesOptions) {
  const clock = options.clock ?? (() => new Date());
  const store = createStore(options.database.db);
  const operations = new Map(options.config.operations.map((operation) => [operation.name, operation]));
  const executors = new Map([...operations.values()].map((operation) => [operation.name, executorOf(operation, clock)]));
  const executorFor =
    options.executorFor ??
    ((name: string) => {
      const executor = executors.get(name);
      if (!executor) throw new Error(`no executor for operation "${name}"`);
      return executor;
    });

  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const transitions = new Counter({
    name: 'twokey_proposal_transitions_total',
    help: 'Proposal state changes, by the status reached',
    labelNames: ['status'],
    registers: [metrics],
  });

  const changes = createChangeFeed();
  const onChange = (proposal: ProposalRecord) => {
    transitions.inc({ status: proposal.status });
    changes.publish(proposal);
  };

  return {
    database: options.database,
    store,
    clock,
    changes,
    metrics,
    operations: () => [...operations.values()],
    operation: (name: string) => operations.get(name),
    proposals: createProposalService({ store, clock, executorFor, onChange, operation: (name) => operations.get(name) }),
    agents: createAgentService({ store, clock, knownOperations: () => [...operations.keys()] }),
    audit: createAuditService(store),
  };
}

export type Services = ReturnType<typeof createServices>;
