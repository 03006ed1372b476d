import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpConnection, OperationDefinition, TwokeyConfig } from '../config/config-file.js';
import { ConfigError } from '../config/errors.js';
import type { ExecutionRequest, Executor } from '../core/executor.js';
import { createUpstreamClient, type UpstreamClient } from './upstream-client.js';
import { operationFor } from './upstream-operations.js';
import { injectTrace } from '../tracing/index.js';

/** `_meta` key carrying the proposal id on every upstream call, so an upstream can drop a repeat. */
export const IDEMPOTENCY_META_KEY = 'io.twokey/idempotency-key';

/** Upstream clients by connection name, shared by every operation that calls that server. */
export function createUpstreamClients() {
  const clients = new Map<string, UpstreamClient>();
  return {
    get(connection: McpConnection): UpstreamClient {
      let client = clients.get(connection.name);
      if (!client) {
        client = createUpstreamClient(connection);
        clients.set(connection.name, client);
      }
      return client;
    },
    async closeAll(): Promise<void> {
      await Promise.all([...clients.values()].map((client) => client.close()));
      clients.clear();
    },
  };
}

export type UpstreamClients = ReturnType<typeof createUpstreamClients>;

function textOf(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return content
    .map((part: unknown) =>
      typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text' ? String((part as { text?: unknown }).text ?? '') : '',
    )
    .join(' ')
    .trim();
}

/**
 * `executor: { type: mcp }`: after approval, calls the upstream tool with the approved arguments and
 * records its answer. Runs outside the commit transaction under an execution claim, like `http`; an
 * upstream error, timeout, oversized answer or answer that breaks its own output schema is a failed
 * execution (the proposal stays approved and can be retried, with the same idempotency key in `_meta`).
 * A read-only tool's call needs no claim: it runs first, and its proposal is recorded with its answer.
 */
export function createMcpExecutor(client: UpstreamClient, tool: string, readOnly: boolean): Executor {
  return {
    kind: 'remote',
    readOnly,
    async run(request: ExecutionRequest) {
      // `traceparent` in `_meta` too, as MCP tracing conventions carry it: stdio upstreams have no headers.
      const trace: Record<string, string> = {};
      injectTrace(trace);
      const result = await client.callTool(tool, request.params, {
        ...trace,
        [IDEMPOTENCY_META_KEY]: request.proposalId,
        'io.twokey/approved-by': request.approvedBy,
      });
      if (result.isError) {
        throw new Error(`the upstream tool answered with an error${textOf(result.content) ? `: ${textOf(result.content).slice(0, 500)}` : ''}`);
      }
      return result.structuredContent ?? { content: result.content };
    },
  };
}

/**
 * Imports every upstream's tools as operations, at start. An unreachable upstream, a tool whose
 * schema twokey cannot enforce, a destructive tool without approvers or a name clash stops start,
 * naming the upstream and the tool (`expose: false` leaves a tool out).
 */
export async function withUpstreamOperations(config: TwokeyConfig, clients: UpstreamClients): Promise<TwokeyConfig> {
  if (config.upstreams.length === 0) return config;
  const issues: string[] = [];
  const imported: OperationDefinition[] = [];
  const names = new Set(config.operations.map((operation) => operation.name));
  for (const [index, upstream] of config.upstreams.entries()) {
    let tools: Tool[];
    try {
      tools = await clients.get(upstream.connection).listTools();
    } catch (error) {
      issues.push(`upstreams[${index}] (${upstream.name}): cannot list its tools: ${error instanceof Error ? error.message : String(error)}`);
      continue;
    }
    const offered = new Set(tools.map((tool) => tool.name));
    for (const unknown of Object.keys(upstream.tools).filter((name) => !offered.has(name))) {
      issues.push(`upstreams[${index}].tools.${unknown}: ${upstream.name} has no such tool`);
    }
    for (const tool of tools) {
      const operation = operationFor(upstream, index, tool, issues);
      if (!operation) continue;
      if (names.has(operation.name)) {
        issues.push(`upstreams[${index}] (${upstream.name}) tool ${tool.name}: operation name ${operation.name} is already taken`);
        continue;
      }
      names.add(operation.name);
      imported.push(operation);
    }
  }
  if (issues.length > 0) throw new ConfigError(`Cannot import the MCP upstreams of ${config.source}:`, issues);
  return { ...config, operations: [...config.operations, ...imported] };
}

/** The imported tools that run without a human (the config made them read-only), for the start-up log. */
export function ungatedUpstreamTools(config: Pick<TwokeyConfig, 'operations'>): Array<{ operation: string; why: string }> {
  return config.operations.flatMap((operation) =>
    operation.upstreamTool?.readOnly && operation.autoApprove ? [{ operation: operation.name, why: operation.autoApprove.reason }] : [],
  );
}
