import type { AgpRuntime } from '../../src/agp/index.js';
import type { OpenExecuteRecord } from '../../src/agp/ports.js';
import type { Idempotency } from '../../src/idempotency/index.js';
import type { Driver } from '../support/database.js';
import { startTestTwokey, type TestTwokey } from '../support/twokey.js';
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
  joes-pizza-quick:
    adapter: http
    url: ${pizzeriaUrl}
    timeout: 1s
    credentials:
      headers:
        Authorization: "Bearer \${JOES_PIZZA_TOKEN}"
  joes-pizza-declared:
    adapter: http
    url: ${pizzeriaUrl}
    amounts: [/order/sum]
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
  /** Edits the config text before it is parsed (policy rules on the approval operation, say). */
  editConfig?: (yaml: string) => string;
}

export interface AgpTwokey extends TestTwokey {
  agp: AgpRuntime;
  idempotency: Idempotency<OpenExecuteRecord>;
  /** AGP's calls are POSTs unless told otherwise, so the suites read `request(url, { body })`. */
  agpRequest(
    url: string,
    options?: { apiKey?: string; body?: unknown; headers?: Record<string, string>; method?: 'GET' | 'POST' },
  ): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
}

/** The shared test harness (secret scan included) with the fake pizzeria's config and AGP settings. */
export async function startAgpTwokey(options: AgpTwokeyOptions): Promise<AgpTwokey> {
  const yaml = agpConfigYaml(options.pizzeriaUrl);
  const running = await startTestTwokey({
    driver: options.driver,
    configYaml: options.editConfig ? options.editConfig(yaml) : yaml,
    configVars: { JOES_PIZZA_TOKEN },
    clock: options.clock,
    listen: options.listen,
    rateLimit: { max: 10_000, timeWindowMs: 60_000 },
    env: {
      AGENR_EXECUTE_POLICY: options.policy ?? 'open',
      ...(options.maxAmountCents === undefined ? {} : { AGENR_MAX_EXECUTE_AMOUNT: String(options.maxAmountCents) }),
    },
  });
  return {
    ...running,
    agp: running.services.agp,
    idempotency: running.idempotency,
    agpRequest: (url, { method = 'POST', ...rest } = {}) => running.request(method, url, rest),
  };
}
