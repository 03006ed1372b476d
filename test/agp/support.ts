import { Writable } from 'node:stream';
import type { AgpRuntime } from '../../src/agp/index.js';
import { parseConfig } from '../../src/config/config-file.js';
import { loadEnv } from '../../src/config/env.js';
import type { Idempotency } from '../../src/idempotency/index.js';
import { startTwokey, type RunningTwokey } from '../../src/runtime/server.js';
import { openTestDatabase, type Driver } from '../support/database.js';
import { freePort } from '../support/processes.js';
import { JOES_PIZZA_TOKEN } from './fake-business.js';

/**
 * A real twokey (startTwokey: real database, fastify, outbox, logger, AGP routes and Idempotency-Key
 * hooks) configured with the fake pizzeria, listening on a real port when the SDK needs one.
 */

export function agpConfigYaml(pizzeriaUrl: string): string {
  return `
operations:
  - name: agp_order
    description: Orders that agents place with businesses over AGP
    confirmationType: payment
    params:
      type: object
      required: [businessId, request]
      properties:
        businessId: { type: string }
        request:
          type: object
          additionalProperties: true
          properties:
            action: { type: string }
            amount_cents: { type: integer }
    summary: "{{ agent }} wants to {{ params.request.action | default: 'order' }} at {{ params.businessId }} for {{ params.request.amount_cents | usd | default: 'an unstated amount' }}."
    expiresIn: 5m
    approval:
      approvers: [web:alice, web:bob, web:owner]
      quorum: 1
    commit: agent
    executor: { type: agp }
  - name: upgrade_plan
    description: Change an organisation's billing plan
    params:
      type: object
      required: [org, plan]
      properties:
        org: { type: string }
        plan: { type: string, enum: [pro, scale] }
    summary: "{{ agent }} wants to move {{ params.org }} to {{ params.plan }}."
    approval:
      approvers: [web:alice]
    commit: agent
    executor: { type: echo }
businesses:
  joes-pizza:
    name: Joe's Pizza
    adapter: http
    url: ${pizzeriaUrl}
    timeout: 2s
    credentials:
      headers:
        Authorization: "Bearer \${JOES_PIZZA_TOKEN}"
  joes-pizza-approved:
    adapter: http
    url: ${pizzeriaUrl}
    credentials:
      headers:
        Authorization: "Bearer \${JOES_PIZZA_TOKEN}"
    approval: { operation: agp_order }
  echo-approved:
    adapter: echo
    approval: { operation: agp_order }
`;
}

export interface AgpTwokeyOptions {
  driver: Driver;
  pizzeriaUrl: string;
  policy?: 'open' | 'confirm' | 'strict';
  maxAmountCents?: number;
  clock?: () => Date;
  listen?: boolean;
}

export interface AgpTwokey extends RunningTwokey {
  logs: string[];
  agp: AgpRuntime;
  idempotency: Idempotency;
  createAgent(name: string, options?: { owners?: string[] }): Promise<{ apiKey: string; id: string }>;
  request(
    url: string,
    options?: { apiKey?: string; body?: unknown; headers?: Record<string, string>; method?: 'GET' | 'POST' },
  ): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
}

export async function startAgpTwokey(options: AgpTwokeyOptions): Promise<AgpTwokey> {
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const database = await openTestDatabase(options.driver);
  const port = options.listen ? await freePort() : 8080;
  const env = loadEnv({
    LOG_LEVEL: 'trace',
    HOST: '127.0.0.1',
    PORT: String(port),
    AGENR_EXECUTE_POLICY: options.policy ?? 'open',
    ...(options.maxAmountCents === undefined ? {} : { AGENR_MAX_EXECUTE_AMOUNT: String(options.maxAmountCents) }),
  });
  const config = parseConfig(agpConfigYaml(options.pizzeriaUrl), { JOES_PIZZA_TOKEN }, 'agp-test.yaml');
  const running = await startTwokey({
    env,
    database,
    config,
    clock: options.clock,
    logStream,
    listen: options.listen ?? false,
    sweepIntervalMs: 60_000,
    outboxBackoff: { baseMs: 50, maxMs: 500 },
    rateLimit: { max: 10_000, timeWindowMs: 60_000 },
  });
  const agp = running.services.agp;
  const idem = running.idempotency;

  return {
    ...running,
    logs,
    agp,
    idempotency: idem,
    async close() {
      await running.close();
      await database.close();
    },
    async createAgent(name, agentOptions = {}) {
      const { agent, apiKey } = await running.services.agents.create({ name, ...agentOptions });
      return { apiKey, id: agent.id };
    },
    async request(url, requestOptions = {}) {
      const response = await running.app.inject({
        method: requestOptions.method ?? 'POST',
        url,
        headers: {
          ...(requestOptions.apiKey ? { authorization: `Bearer ${requestOptions.apiKey}` } : {}),
          ...requestOptions.headers,
        },
        ...(requestOptions.body !== undefined ? { payload: requestOptions.body as object } : {}),
      });
      return { status: response.statusCode, body: response.body ? JSON.parse(response.body) : null, headers: response.headers };
    },
  };
}
