import { Writable } from 'node:stream';
import { parseConfig } from '../../src/config/config-file.js';
import { loadEnv } from '../../src/config/env.js';
import type { Executor } from '../../src/core/executor.js';
import type { Database } from '../../src/db/database.js';
import type { ChatIntegration } from '../../src/chat/types.js';
import type { Env } from '../../src/config/env.js';
import type { Services } from '../../src/runtime/services.js';
import { startTwokey, type RunningTwokey } from '../../src/runtime/server.js';
import { openTestDatabase, type Driver } from './database.js';
import { assertNoSecrets } from './secret-scan.js';

export const testConfigYaml = `
operations:
  - name: upgrade_plan
    description: Change an organisation's billing plan
    confirmationType: payment
    params:
      type: object
      required: [org, plan]
      properties:
        org: { type: string }
        plan: { type: string, enum: [pro, scale, enterprise] }
        amount_cents: { type: integer }
    summary: "{{agent}} is requesting to upgrade {{params.org}} to the {{params.plan}} plan."
    expiresIn: 5m
    approval:
      approvers: [web:alice, web:bob, web:owner, slack:U0ALICE]
      quorum: 1
    commit: agent
    executor: { type: echo }
  - name: delete_workspace
    description: Delete a workspace
    params:
      type: object
      required: [workspace]
      properties:
        workspace: { type: string }
    summary: "{{agent}} wants to delete workspace {{params.workspace}}."
    approval:
      approvers: [web:alice, web:bob, web:carol]
      quorum: 2
    commit: on_approve
    executor: { type: echo }
`;

export interface TestTwokey extends RunningTwokey {
  logs: string[];
  /** Literal secrets the test configured (signing secrets, bot tokens) that must never surface. */
  secrets: string[];
  /** Creates an agent and returns its API key. */
  createAgent(name: string, options?: { owners?: string[]; operations?: string[] }): Promise<{ apiKey: string; id: string; callbackSecret: string }>;
  request(method: 'GET' | 'POST', url: string, options?: { apiKey?: string; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any }>;
}

export interface TestTwokeyOptions {
  driver: Driver;
  configYaml?: string;
  clock?: () => Date;
  executorFor?: (operation: string) => Executor;
  rateLimit?: { max: number; timeWindowMs: number };
  /** Extra environment (Slack/Discord settings, TWOKEY_PUBLIC_URL…), validated like the real one. */
  env?: Record<string, string>;
  integrations?: (services: Services, env: Env) => ChatIntegration[];
  /** Share a database between several instances (replicas); the caller closes it. */
  database?: Database;
  outboxPollMs?: number;
  outboxLeaseMs?: number;
  outboxBackoff?: { baseMs: number; maxMs: number };
  sweepIntervalMs?: number;
}

/** A real twokey (real database, real fastify, real logger) driven through `app.inject`. */
export async function startTestTwokey(options: TestTwokeyOptions): Promise<TestTwokey> {
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const database = options.database ?? (await openTestDatabase(options.driver));
  const env = loadEnv({ LOG_LEVEL: 'trace', ...options.env });
  const running = await startTwokey({
    env,
    database,
    config: parseConfig(options.configYaml ?? testConfigYaml, {}, 'test.yaml'),
    clock: options.clock,
    executorFor: options.executorFor,
    logStream,
    listen: false,
    rateLimit: options.rateLimit,
    sweepIntervalMs: options.sweepIntervalMs ?? 60_000,
    outboxPollMs: options.outboxPollMs,
    outboxLeaseMs: options.outboxLeaseMs,
    outboxBackoff: options.outboxBackoff ?? { baseMs: 50, maxMs: 500 },
    integrations: options.integrations ? (services) => options.integrations?.(services, env) ?? [] : undefined,
  });
  const secrets = Object.entries(options.env ?? {})
    .filter(([name]) => /TOKEN|SECRET|KEY/.test(name))
    .map(([, value]) => value);
  return {
    ...running,
    logs,
    secrets,
    async close() {
      await running.close();
      // Every suite that boots twokey proves its logs stayed clean.
      assertNoSecrets('the captured logs', logs.join(''), secrets);
      if (!options.database) await database.close();
    },
    async createAgent(name, agentOptions = {}) {
      const { agent, apiKey, callbackSecret } = await running.services.agents.create({ name, ...agentOptions });
      return { apiKey, id: agent.id, callbackSecret };
    },
    async request(method, url, requestOptions = {}) {
      const response = await running.app.inject({
        method,
        url,
        headers: {
          ...(requestOptions.apiKey ? { authorization: `Bearer ${requestOptions.apiKey}` } : {}),
          ...requestOptions.headers,
        },
        ...(requestOptions.body !== undefined ? { payload: requestOptions.body as object } : {}),
      });
      const body = response.body ? JSON.parse(response.body) : null;
      // The one designed exception: a proposal's 201 hands its token to the proposing agent, once.
      const { confirmToken: _handedOut, confirmationToken: _prepared, ...rest } = (body ?? {}) as Record<string, unknown>;
      assertNoSecrets(`the response to ${method} ${url}`, JSON.stringify(rest), secrets);
      return { status: response.statusCode, body };
    },
  };
}
