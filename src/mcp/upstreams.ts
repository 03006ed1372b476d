import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpConnection, OperationDefinition, TwokeyConfig, UpstreamDefinition } from '../config/config-file.js';
import { ConfigError } from '../config/errors.js';
import { closeParamsSchema, compileParamsSchema, describeSchemaPath, ParamsSchemaError } from '../config/params-schema.js';
import { compileSummaryTemplate } from '../config/summary-template.js';
import type { ExecutionRequest, Executor } from '../core/executor.js';
import { createUpstreamClient, type UpstreamClient } from './upstream-client.js';
import { injectTrace } from '../tracing/index.js';

/** The decider recorded on calls of read-only upstream tools, which pass without a human. */
export const READ_ONLY_DECIDER = 'policy:upstream-readonly';

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
 */
export function createMcpExecutor(client: UpstreamClient, tool: string): Executor {
  return {
    kind: 'remote',
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

/** `files` + `delete-file` → `files_delete_file`: operation names are lower_snake. */
export function operationNameFor(upstream: string, tool: string): string {
  return `${upstream}_${tool}`
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, 64);
}

const TEMPLATE_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A summary the upstream cannot write: the tool's name and each argument, rendered by twokey. */
export function generatedSummary(upstream: string, tool: string, schema: Record<string, unknown>): string {
  const properties = Object.keys((schema['properties'] as Record<string, unknown> | undefined) ?? {});
  const named = properties.filter((name) => TEMPLATE_IDENTIFIER.test(name));
  const safeTool = tool.replace(/[^A-Za-z0-9_.-]/g, '_');
  const listed = named.map((name) => `${name}={{ params.${name} | json }}`).join(', ');
  const rest = properties.length - named.length;
  return `{{ agent }} wants to call ${safeTool} on ${upstream}${listed ? ` with ${listed}` : ' with no arguments'}${rest > 0 ? ` (and ${rest} more)` : ''}.`;
}

function operationFor(upstream: UpstreamDefinition, index: number, tool: Tool, issues: string[]): OperationDefinition | undefined {
  const override = upstream.tools[tool.name] ?? { expose: true };
  if (!override.expose) return undefined;
  const field = `upstreams[${index}] (${upstream.name}) tool ${tool.name}`;
  const readOnly = tool.annotations?.readOnlyHint === true && override.approval === undefined;
  const approval = readOnly ? { approvers: [READ_ONLY_DECIDER], quorum: 1, remindMs: [] } : (override.approval ?? upstream.defaults.approval);
  if (!approval) {
    issues.push(`${field}: is not read-only, so it needs approval: set upstreams[${index}].approval or tools.${tool.name}.approval (or expose: false)`);
    return undefined;
  }
  // SDK servers declare draft-07; the keywords tools use mean the same in 2020-12.
  const { $schema: _declared, ...inputSchema } = tool.inputSchema as Record<string, unknown>;
  let paramsSchema: Record<string, unknown>;
  let validateParams: OperationDefinition['validateParams'];
  try {
    paramsSchema = closeParamsSchema(inputSchema);
    validateParams = compileParamsSchema(paramsSchema);
  } catch (error) {
    if (!(error instanceof ParamsSchemaError)) throw error;
    issues.push(`${describeSchemaPath(`${field} inputSchema`, error.path)}: ${error.message} (or set tools.${tool.name}.expose: false)`);
    return undefined;
  }
  let renderSummary: OperationDefinition['renderSummary'];
  try {
    renderSummary = compileSummaryTemplate(override.summary ?? generatedSummary(upstream.name, tool.name, paramsSchema), paramsSchema);
  } catch (error) {
    issues.push(`${field} summary: ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  }
  const description = override.description ?? tool.description ?? tool.title ?? `${tool.name} on ${upstream.name}`;
  return {
    name: operationNameFor(upstream.name, tool.name),
    description,
    confirmationType: override.confirmationType ?? upstream.defaults.confirmationType,
    paramsSchema,
    validateParams,
    renderSummary,
    expiresInMs: override.expiresInMs ?? upstream.defaults.expiresInMs,
    approval,
    // A read-only call is decided by the rule at once and runs then.
    commit: readOnly ? 'on_approve' : (override.commit ?? upstream.defaults.commit),
    executor: { type: 'mcp', connection: upstream.connection, tool: tool.name },
    upstreamTool: { upstream: upstream.name, tool: tool.name, readOnly },
    policy: [],
    grants: null,
    automaticDecisions: 'message',
    ...(readOnly ? { autoApprove: { decider: READ_ONLY_DECIDER, reason: `${tool.name} on ${upstream.name} is read-only (readOnlyHint)` } } : {}),
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
