import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { parseConfig } from '../../src/config/config-file.js';
import { loadEnv } from '../../src/config/env.js';
import type { Executor } from '../../src/core/executor.js';
import type { Database } from '../../src/db/database.js';
import type { ChatIntegration } from '../../src/chat/types.js';
import type { Env } from '../../src/config/env.js';
import type { OutboxLane } from '../../src/outbox/worker.js';
import type { Services } from '../../src/runtime/services.js';
import { startTwokey, type ChatWiring, type RunningTwokey } from '../../src/runtime/server.js';
import { openTestDatabase, type Driver } from './database.js';
import { configYaml, deleteWorkspaceOperation, upgradePlanOperation } from './operations.js';
import { freePort } from './processes.js';
import { assertNoSecrets } from './secret-scan.js';

export const testConfigYaml = configYaml([
  upgradePlanOperation({
    confirmationType: 'payment',
    amountCents: true,
    expiresIn: '5m',
    approvers: ['web:alice', 'web:bob', 'web:owner', 'slack:U0ALICE'],
    quorum: 1,
    commit: 'agent',
  }),
  deleteWorkspaceOperation({ approvers: ['web:alice', 'web:bob', 'web:carol'], quorum: 2, commit: 'on_approve' }),
]);

/** The checkpoint signing key every test instance shares (a fleet shares one key). */
export const TEST_AUDIT_KEY = Buffer.alloc(32, 7).toString('base64');

export interface TestTwokey extends RunningTwokey {
  /** Where this instance publishes its signed audit checkpoints. */
  checkpointDir: string;
  logs: string[];
  /** Literal secrets the test configured (signing secrets, bot tokens) that must never surface. */
  secrets: string[];
  /** Creates an agent and returns its API key. */
  createAgent(name: string, options?: { owners?: string[]; operations?: string[] }): Promise<{ apiKey: string; id: string; callbackSecret: string }>;
  request(
    method: 'GET' | 'POST',
    url: string,
    options?: { apiKey?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
}

export interface TestTwokeyOptions {
  driver: Driver;
  configYaml?: string;
  /** `${NAME}` values the config refers to (business credentials): secrets, scanned for like the env's. */
  configVars?: Record<string, string>;
  /** Listen on a real loopback port (for clients that need a URL) instead of only `app.inject`. */
  listen?: boolean;
  clock?: () => Date;
  executorFor?: (operation: string) => Executor;
  rateLimit?: { max: number; timeWindowMs: number };
  /** Extra environment (Slack/Discord settings, TWOKEY_PUBLIC_URL…), validated like the real one. */
  env?: Record<string, string>;
  /** `wiring`: what the runtime decides for chat platforms on this database (concurrency, the database URL). */
  integrations?: (services: Services, env: Env, wiring: ChatWiring) => ChatIntegration[];
  /** Share a database between several instances (replicas); the caller closes it. */
  database?: Database;
  outboxPollMs?: number;
  outboxLeaseMs?: number;
  outboxBackoff?: { baseMs: number; maxMs: number };
  outboxLanes?: readonly OutboxLane[];
  outboxHandlerDeadlineMs?: number;
  callbackTimeoutMs?: number;
  sweepIntervalMs?: number;
  longPollIntervalMs?: number;
  /**
   * Everything the fake Slack / fake Discord received as message content (call arguments and
   * bodies, not their Authorization headers): scanned for secrets at close, like logs and answers.
   */
  chatPayloads?: () => readonly unknown[];
  pruneIntervalMs?: number;
  auditIntervalMs?: number;
  auditLeaderRetryMs?: number;
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
  const checkpointDir = mkdtempSync(join(tmpdir(), 'twokey-checkpoints-'));
  const start = async () => {
    // The suites' receivers listen on loopback, which twokey refuses to call unless allowed.
    const env = loadEnv({
      LOG_LEVEL: 'trace',
      TWOKEY_CALLBACK_ALLOW: '127.0.0.0/8',
      // Suites send refused keys on purpose, from one address; test/http/limits.test.ts tests the limit itself.
      TWOKEY_MAX_FAILED_AUTH_PER_MINUTE: '100000',
      TWOKEY_AUDIT_KEY: TEST_AUDIT_KEY,
      TWOKEY_AUDIT_CHECKPOINTS: checkpointDir,
      ...(options.listen ? { HOST: '127.0.0.1', PORT: String(await freePort()) } : {}),
      ...options.env,
    });
    return startTwokey({
      env,
      database,
      config: parseConfig(options.configYaml ?? testConfigYaml, options.configVars ?? {}, 'test.yaml'),
      clock: options.clock,
      executorFor: options.executorFor,
      logStream,
      listen: options.listen ?? false,
      rateLimit: options.rateLimit,
      sweepIntervalMs: options.sweepIntervalMs ?? 60_000,
      longPollIntervalMs: options.longPollIntervalMs,
      auditIntervalMs: options.auditIntervalMs,
      auditLeaderRetryMs: options.auditLeaderRetryMs,
      outboxPollMs: options.outboxPollMs,
      outboxLeaseMs: options.outboxLeaseMs,
      outboxBackoff: options.outboxBackoff ?? { baseMs: 50, maxMs: 500 },
      outboxLanes: options.outboxLanes,
      outboxHandlerDeadlineMs: options.outboxHandlerDeadlineMs,
      callbackTimeoutMs: options.callbackTimeoutMs,
      pruneIntervalMs: options.pruneIntervalMs,
      integrations: options.integrations ? (services, wiring) => options.integrations?.(services, env, wiring) ?? [] : undefined,
    });
  };
  let running: Awaited<ReturnType<typeof start>>;
  try {
    running = await start();
  } catch (error) {
    // A start that fails (as some suites mean it to) leaves nothing behind: its directory, its database.
    rmSync(checkpointDir, { recursive: true, force: true });
    if (!options.database) await database.close().catch(() => undefined);
    throw error;
  }
  const secrets = Object.entries(options.env ?? {})
    // TWOKEY_PUBLIC_URL holds "KEY" in the product's name, not a secret: chat messages link to it.
    .filter(([name]) => !name.endsWith('_URL') && /TOKEN|SECRET|KEY|PASSWORD/.test(name.replace(/^TWOKEY_/, '')))
    .map(([, value]) => value)
    .concat(Object.values(options.configVars ?? {}));
  return {
    ...running,
    checkpointDir: options.env?.TWOKEY_AUDIT_CHECKPOINTS ?? checkpointDir,
    logs,
    secrets,
    async close() {
      try {
        await running.close();
        // Every suite that boots twokey proves its logs stayed clean, and its chat messages too.
        assertNoSecrets('the captured logs', logs.join(''), secrets);
        assertNoSecrets('the chat API calls', JSON.stringify(options.chatPayloads?.() ?? []), secrets);
        if (!options.database) await database.close();
      } finally {
        rmSync(checkpointDir, { recursive: true, force: true });
      }
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
      assertNoSecrets(`the response to ${method} ${url}`, JSON.stringify(withoutHandedOutTokens(body)), secrets);
      return { status: response.statusCode, body, headers: response.headers };
    },
  };
}

/**
 * The designed exceptions to "no token in an answer": a proposal's 201 (and AGP's prepare) hands
 * its token to the proposing agent, once, and AGP's echo business answers an order with the
 * confirmation token the specification has it hand back in `data`.
 */
function withoutHandedOutTokens(body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return body;
  const { confirmToken: _handedOut, confirmationToken: _prepared, ...rest } = body as Record<string, unknown>;
  const data = rest['data'];
  if (typeof data === 'object' && data !== null) {
    const { confirmationToken: _echoed, ...dataRest } = data as Record<string, unknown>;
    return { ...rest, data: dataRest };
  }
  return rest;
}
