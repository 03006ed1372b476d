import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { OutboxBacklog } from '../outbox/ports.js';

/** A policy or a grant decides in milliseconds, a person in seconds to hours. */
const DECISION_BUCKETS = [0.1, 1, 5, 15, 30, 60, 120, 300, 900, 3600, 14_400, 86_400];

/** Most requests answer in milliseconds; long-polls (`?wait=`, up to 60 s) and MCP calls (up to `TWOKEY_MCP_WAIT`) in seconds. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * How long the database figures of one scrape are reused. `/metrics` needs no key: however many
 * scrapers (or strangers) ask, the database answers these counts at most once per interval.
 */
const DATABASE_FIGURES_TTL_MS = 5_000;

export interface MetricSources {
  proposalsByStatus(): Promise<Record<string, number>>;
  jobsByStatus(): Promise<Record<string, number>>;
  /** Unfinished outbox jobs by kind: how many are due and waiting for a worker, and since when. */
  outboxBacklog(now: Date): Promise<OutboxBacklog[]>;
}

export interface MetricOptions {
  clock: () => Date;
  /** The outbox lane that runs a job kind (a label beside the kind). */
  laneOf(kind: string): string;
  /** How long the database figures are reused (default 5 s). */
  databaseFiguresTtlMs?: number;
}

/**
 * `read`, answered from the last call while it is younger than `ttlMs`; concurrent callers share
 * one call in flight. A failed read is not kept: the next scrape tries again.
 */
function reusedFor<T>(ttlMs: number, now: () => number, read: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | null = null;
  return () => {
    const at = now();
    if (last && at - last.at < ttlMs) return last.value;
    const value = read();
    const entry = { at, value };
    last = entry;
    value.catch(() => {
      if (last === entry) last = null;
    });
    return value;
  };
}

/**
 * The gauges that read the database. Read at scrape time, so every replica reports the same
 * figures, with no timer running on any replica when nobody scrapes; each query uses an index
 * (jobs by status and run_at) and only unfinished jobs are grouped.
 */
function registerDatabaseGauges(registry: Registry, sources: MetricSources, options: MetricOptions): void {
  const ttl = options.databaseFiguresTtlMs ?? DATABASE_FIGURES_TTL_MS;
  const now = () => options.clock().getTime();
  const proposals = reusedFor(ttl, now, () => sources.proposalsByStatus());
  const jobs = reusedFor(ttl, now, () => sources.jobsByStatus());
  const backlog = reusedFor(ttl, now, () => sources.outboxBacklog(options.clock()));
  // A kind whose backlog empties reports 0 rather than vanishing, so rates and alerts see the drop.
  const kindsSeen = new Set<string>();
  const backlogByKind = async () => {
    const rows = new Map((await backlog()).map((row) => [row.kind, row]));
    for (const kind of rows.keys()) kindsSeen.add(kind);
    return [...kindsSeen].map((kind) => ({ kind, lane: options.laneOf(kind), due: rows.get(kind)?.due ?? 0, oldest: rows.get(kind)?.oldestDueSeconds ?? 0 }));
  };

  new Gauge({
    name: 'twokey_proposals',
    help: 'Proposals by status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [status, count] of Object.entries(await proposals())) this.set({ status }, count);
    },
  });
  new Gauge({
    name: 'twokey_outbox_jobs',
    help: 'Outbox jobs by status (queued = depth, dead = given up, waiting for `twokey jobs retry`)',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      this.reset();
      const counts = await jobs();
      for (const status of ['queued', 'running', 'dead']) this.set({ status }, counts[status] ?? 0);
    },
  });
  new Gauge({
    name: 'twokey_outbox_due_jobs',
    help: 'Outbox jobs due now and not running (waiting for a worker), by lane and kind',
    labelNames: ['lane', 'kind'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const row of await backlogByKind()) this.set({ lane: row.lane, kind: row.kind }, row.due);
    },
  });
  new Gauge({
    name: 'twokey_outbox_oldest_due_job_age_seconds',
    help: 'How long the oldest due outbox job has waited for a worker, by lane and kind (0 when none is due)',
    labelNames: ['lane', 'kind'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const row of await backlogByKind()) this.set({ lane: row.lane, kind: row.kind }, row.oldest);
    },
  });
}

/** twokey's Prometheus metrics: gauges read from the database, counters and histograms of what this replica did. */
export function createMetrics(sources: MetricSources, options: MetricOptions) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerDatabaseGauges(registry, sources, options);

  return {
    registry,
    transitions: new Counter({
      name: 'twokey_proposal_transitions_total',
      help: 'Proposal state changes made by this replica, by the status reached',
      labelNames: ['status'],
      registers: [registry],
    }),
    timeToDecisionSeconds: new Histogram({
      name: 'twokey_time_to_decision_seconds',
      help: 'Time from propose to the decision (approved, rejected, expired, cancelled), per operation; once per proposal, whoever decided (a person, a policy rule, a grant)',
      labelNames: ['operation', 'decision'],
      buckets: DECISION_BUCKETS,
      registers: [registry],
    }),
    /** The same observations under the first name it had; kept for existing dashboards. */
    decisionSeconds: new Histogram({
      name: 'twokey_decision_seconds',
      help: 'Deprecated: the same as twokey_time_to_decision_seconds',
      labelNames: ['decision', 'operation'],
      buckets: DECISION_BUCKETS,
      registers: [registry],
    }),
    executorSeconds: new Histogram({
      name: 'twokey_executor_seconds',
      help: 'Executor call latency',
      labelNames: ['operation', 'outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    /** The audit integrator found the chain in conflict with what it signed before, and stopped signing. */
    auditAlerts: new Counter({
      name: 'twokey_audit_alerts_total',
      help: 'Audit integrity alerts: the chain no longer continues the last signed checkpoint (a deleted tail, a rewritten row); integration stops until resolved',
      labelNames: ['kind'],
      registers: [registry],
    }),
    jobOutcomes: new Counter({
      name: 'twokey_outbox_job_outcomes_total',
      help: 'Outbox job runs by kind and outcome (done, retry, dead)',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    }),
    requestSeconds: new Histogram({
      name: 'twokey_http_request_duration_seconds',
      help: 'HTTP requests answered by this replica: latency by route pattern (never the URL itself), method and status',
      labelNames: ['route', 'method', 'status'],
      buckets: REQUEST_BUCKETS,
      registers: [registry],
    }),
    authRefusals: new Counter({
      name: 'twokey_auth_refusals_total',
      help: 'Requests refused with 401, by route pattern and reason (missing_key, unknown_key, revoked_key, bad_signature, no_session, other)',
      labelNames: ['route', 'reason'],
      registers: [registry],
    }),
    rateLimitRefusals: new Counter({
      name: 'twokey_rate_limit_refusals_total',
      help: 'Requests refused with 429, by route pattern and the limit reached (requests, failed_auth, long_polls, pending_proposals, other)',
      labelNames: ['route', 'limit'],
      registers: [registry],
    }),
    mcpToolCalls: new Counter({
      name: 'twokey_mcp_tool_calls_total',
      help: 'MCP tools/call answered by this replica, by tool and outcome (committed, approved, pending, denied, expired, cancelled, failed, refused, unknown_tool, error)',
      labelNames: ['tool', 'outcome'],
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
