import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** A policy or a grant decides in milliseconds, a person in seconds to hours. */
const DECISION_BUCKETS = [0.1, 1, 5, 15, 30, 60, 120, 300, 900, 3600, 14_400, 86_400];

export interface MetricSources {
  proposalsByStatus(): Promise<Record<string, number>>;
  jobsByStatus(): Promise<Record<string, number>>;
}

/** twokey's Prometheus metrics; the gauges read the database at scrape time, so every replica agrees. */
export function createMetrics(sources: MetricSources) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  new Gauge({
    name: 'twokey_proposals',
    help: 'Proposals by status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [status, count] of Object.entries(await sources.proposalsByStatus())) this.set({ status }, count);
    },
  });
  new Gauge({
    name: 'twokey_outbox_jobs',
    help: 'Outbox jobs by status (queued = depth, dead = given up, waiting for `twokey jobs retry`)',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      this.reset();
      const counts = await sources.jobsByStatus();
      for (const status of ['queued', 'running', 'dead']) this.set({ status }, counts[status] ?? 0);
    },
  });

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
    /** Refused agent credentials (missing, unknown or revoked key), by surface and by the answer: 401, or 429 once over the limit. */
    agentAuthRefusals: new Counter({
      name: 'twokey_agent_auth_refusals_total',
      help: 'Refused agent API keys (missing, unknown, revoked) on /v1, /agp and /mcp, by surface and answer (401, or 429 past TWOKEY_MAX_FAILED_AUTH_PER_MINUTE)',
      labelNames: ['surface', 'answer'],
      registers: [registry],
    }),
    /** Every 429 twokey answered, whichever limit refused (requests per key, failed authentications, long-polls, pending proposals). */
    rateLimited: new Counter({
      name: 'twokey_rate_limited_total',
      help: 'Requests answered 429 by twokey, by surface',
      labelNames: ['surface'],
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
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
