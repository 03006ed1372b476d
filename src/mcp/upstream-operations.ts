import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { OperationDefinition, UndeclaredArguments, UpstreamDefinition } from '../config/config-file.js';
import { displaySafe } from '../config/display-text.js';
import {
  compileParamsSchema,
  compileUndeclaredFinder,
  describeSchemaPath,
  ParamsSchemaError,
  rewriteSchemaAnnotations,
  sealParamsSchema,
} from '../config/params-schema.js';
import { compileSummaryTemplate, type JSONSchema, type RenderSummary } from '../config/summary-template.js';
import { scrubSecrets } from '../lib/secrets.js';
import { cutAtWord } from './tools.js';

/**
 * One upstream MCP tool as a twokey operation. Everything the upstream says is another party's
 * word: its schema is sealed (or, where the operator opts in, its extra arguments are named in the
 * summary), its `readOnlyHint` exempts nothing unless the operator trusts it, and its description
 * and title reach agents and approvers labelled, made visible and without token shapes.
 */

/** The decider recorded on calls of tools the operator's config lets run without a human. */
export const READ_ONLY_DECIDER = 'policy:upstream-readonly';

/** `files` + `delete-file` → `files_delete_file`: operation names are lower_snake. */
export function operationNameFor(upstream: string, tool: string): string {
  return `${upstream}_${tool}`
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, 64);
}

// Any twokey secret shape, however short what follows: a fake `tk_conf_FAKE` in a description is
// meant to be copied by a model, and the log scrubber's patterns only match real lengths.
const TOKEN_SHAPES = /(?:tk_[A-Za-z]+_|whsec_)[A-Za-z0-9_-]*/g;
const MAX_DESCRIPTION = 1_000;
const MAX_TITLE = 100;

/** An upstream's text as one visible value with no token shapes in it (what twokey shows of a param, for agents and people). */
function upstreamText(text: string, max: number): string {
  return cutAtWord(scrubSecrets(displaySafe(text.trim())).replace(TOKEN_SHAPES, '[REDACTED]'), max);
}

/** The upstream's description, marked as its words: a quoted string after twokey's label. */
export function upstreamDescription(upstream: string, tool: Pick<Tool, 'name' | 'description'>): string {
  const words = tool.description?.trim() ? upstreamText(tool.description, MAX_DESCRIPTION) : '';
  return words ? `From upstream ${upstream}: ${JSON.stringify(words)}` : `${tool.name} on ${upstream}`;
}

/** The upstream's display name (`title`, else `annotations.title`), made safe to show. */
function upstreamTitle(tool: Tool): string | undefined {
  const title = tool.title ?? tool.annotations?.title;
  return title?.trim() ? upstreamText(title, MAX_TITLE) : undefined;
}

const shown = (value: unknown): string => displaySafe(JSON.stringify(value) ?? 'null');

function unescapePointer(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
}

/** The value at a JSON Pointer into the params, and the pointer as `a.b.0` for people. */
function argumentAt(params: Record<string, unknown>, pointer: string): { name: string; value: unknown } {
  const segments = pointer.split('/').slice(1).map(unescapePointer);
  let value: unknown = params;
  for (const segment of segments) value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[segment] : undefined;
  return { name: displaySafe(segments.join('.')), value };
}

/**
 * The summary twokey writes when the operator wrote none: the tool, and every declared argument the
 * call carries with its whole value (any property name, nested values in full).
 */
function generatedSummary(upstream: string, tool: string, schema: JSONSchema): RenderSummary {
  const declared = Object.keys((schema['properties'] as Record<string, unknown> | undefined) ?? {});
  const safeTool = displaySafe(tool);
  return ({ agent, params }) => {
    const listed = declared.filter((name) => Object.hasOwn(params, name)).map((name) => `${displaySafe(name)}=${shown(params[name])}`);
    return `${displaySafe(agent)} wants to call ${safeTool} on ${upstream}${listed.length > 0 ? ` with ${listed.join(', ')}` : ' with no arguments'}.`;
  };
}

/** `undeclaredArguments: show`: every argument the sealed schema would have refused, named after the summary. */
function withUndeclared(render: RenderSummary, findUndeclared: (params: unknown) => string[]): RenderSummary {
  return (context) => {
    const summary = render(context);
    const extra = findUndeclared(context.params).map((pointer) => argumentAt(context.params, pointer));
    if (extra.length === 0) return summary;
    return `${summary.replace(/\.$/, '')}, and also ${extra.map(({ name, value }) => `${name}=${shown(value)}`).join(', ')}.`;
  };
}

/** Why a tool may run without a human, or null: only the operator's config decides. */
function ungatedBecause(upstream: UpstreamDefinition, tool: Tool): string | null {
  const override = upstream.tools[tool.name];
  const which = `${tool.name} on ${upstream.name}`;
  if (override?.readOnly === true) return `the config marks ${which} read-only (tools.${tool.name}.readOnly)`;
  if (override?.readOnly === false || override?.approval !== undefined) return null;
  if (upstream.trustAnnotations && tool.annotations?.readOnlyHint === true) {
    return `the server marks ${which} read-only (readOnlyHint) and the config trusts its annotations (trustAnnotations)`;
  }
  return null;
}

interface ParamsHandling {
  paramsSchema: JSONSchema;
  validateParams: OperationDefinition['validateParams'];
  /** Set under `undeclaredArguments: show`: the arguments the summary must name on top of the declared ones. */
  findUndeclared?: (params: unknown) => string[];
}

/**
 * `refuse`: the sealed schema is what agents see and what twokey enforces. `show`: the upstream's own
 * schema as it declared it (what it accepts is accepted), and a finder for what the sealed one refuses.
 */
function paramsHandling(inputSchema: JSONSchema, mode: UndeclaredArguments): ParamsHandling {
  const sealed = sealParamsSchema(inputSchema);
  const validateSealed = compileParamsSchema(sealed);
  if (mode === 'refuse') return { paramsSchema: sealed, validateParams: validateSealed };
  return { paramsSchema: inputSchema, validateParams: compileParamsSchema(inputSchema), findUndeclared: compileUndeclaredFinder(sealed) };
}

export function operationFor(upstream: UpstreamDefinition, index: number, tool: Tool, issues: string[]): OperationDefinition | undefined {
  const override = upstream.tools[tool.name] ?? { expose: true };
  if (!override.expose) return undefined;
  const field = `upstreams[${index}] (${upstream.name}) tool ${tool.name}`;
  const because = ungatedBecause(upstream, tool);
  const readOnly = because !== null;
  const approval = readOnly ? { approvers: [READ_ONLY_DECIDER], quorum: 1, remindMs: [] } : (override.approval ?? upstream.defaults.approval);
  if (!approval) {
    const hinted = tool.annotations?.readOnlyHint === true ? ' (its server marks it read-only, a hint twokey does not act on by itself)' : '';
    issues.push(
      `${field}: needs approval${hinted}: set upstreams[${index}].approval or tools.${tool.name}.approval, ` +
        `tools.${tool.name}.readOnly: true if it changes nothing, or tools.${tool.name}.expose: false`,
    );
    return undefined;
  }
  // SDK servers declare draft-07; the keywords tools use mean the same in 2020-12.
  const { $schema: _declared, ...declaredSchema } = tool.inputSchema as Record<string, unknown>;
  // Its schema's titles and descriptions are the upstream's words too, read by every agent.
  const inputSchema = rewriteSchemaAnnotations(declaredSchema, (text) => upstreamText(text, MAX_DESCRIPTION));
  let params: ParamsHandling;
  try {
    params = paramsHandling(inputSchema, override.undeclaredArguments ?? upstream.defaults.undeclaredArguments);
  } catch (error) {
    if (!(error instanceof ParamsSchemaError)) throw error;
    issues.push(`${describeSchemaPath(`${field} inputSchema`, error.path)}: ${error.message} (or set tools.${tool.name}.expose: false)`);
    return undefined;
  }
  let renderSummary: RenderSummary;
  try {
    renderSummary = override.summary
      ? compileSummaryTemplate(override.summary, params.paramsSchema)
      : generatedSummary(upstream.name, tool.name, params.paramsSchema);
  } catch (error) {
    issues.push(`${field} summary: ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  }
  // Its own display name, else its name (what MCP clients show when a tool has no title).
  const title = upstreamTitle(tool) ?? `${tool.name} on ${upstream.name}`;
  return {
    name: operationNameFor(upstream.name, tool.name),
    // The operator's own words need no label; the upstream's always carry one.
    description: override.description ?? upstreamDescription(upstream.name, tool),
    title,
    confirmationType: override.confirmationType ?? upstream.defaults.confirmationType,
    paramsSchema: params.paramsSchema,
    validateParams: params.validateParams,
    renderSummary: params.findUndeclared ? withUndeclared(renderSummary, params.findUndeclared) : renderSummary,
    expiresInMs: override.expiresInMs ?? upstream.defaults.expiresInMs,
    approval,
    // A read-only call is decided by the rule at once and runs then.
    commit: readOnly ? 'on_approve' : (override.commit ?? upstream.defaults.commit),
    executor: { type: 'mcp', connection: upstream.connection, tool: tool.name },
    upstreamTool: { upstream: upstream.name, tool: tool.name, readOnly },
    policy: [],
    grants: null,
    automaticDecisions: 'message',
    ...(because ? { autoApprove: { decider: READ_ONLY_DECIDER, reason: because } } : {}),
  };
}
