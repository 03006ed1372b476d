import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import type * as z from 'zod';
import { ConfigError, formatFieldPath } from './errors.js';
import { systemErrorText } from '../lib/system-errors.js';
import { closeParamsSchema, compileParamsSchema, describeSchemaPath, ParamsSchemaError } from './params-schema.js';
import { compileResultTemplate, compileSummaryTemplate } from './summary-template.js';
import type { ResultContext } from './summary-template.js';
import { operationFieldsOf, type CommitMode, type OperationSpec } from '../core/model.js';
import type { IdentityKind } from '../core/identity.js';
import type { ApprovalParts, EscalateParts } from '../core/chat-platform.js';
import { chatPlatforms, identities } from '../platforms/index.js';
import type { PersonDefinition } from '../core/people.js';
import { peopleIssues, quorumIssues } from './people-config.js';
import { buildApproverRule, buildPolicy, type EscalationSettings, type GrantSettings } from './policy-config.js';
import { buildConsoleConfig, type ConsoleSignInConfig } from './console-config.js';
import type { ApproverRule } from '../policy/approver-rule.js';
import { configErrorMap, configSchema, describeIssues, duration } from './config-schema.js';
import type { approvalSchema, mcpConnectionFields, operationSchema, upstreamSchema } from './config-schema.js';
import type { PolicyRule } from '../policy/rules.js';

// The core owns these types; the config re-exports them so nothing declares them twice.
export type { ParamError, SummaryContext, ConfirmationType, CommitMode } from '../core/model.js';
export type { PersonDefinition } from '../core/people.js';
export type { ResultContext } from './summary-template.js';

// The result types below are plain data and functions, so other modules can import them
// (with `import type`) without depending on zod, ajv or liquidjs.

// The settings config builds are the core's types, not copies: these fail to compile when they drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const grantsAreTheCores: Same<GrantSettings, NonNullable<OperationSpec['grants']>> = true;
const escalationIsTheCores: Same<EscalationSettings, NonNullable<OperationSpec['approval']['escalate']>> = true;
void grantsAreTheCores;
void escalationIsTheCores;

/** An operation as the core sees it (`OperationSpec`), plus what only the runtime reads. */
export interface OperationDefinition extends OperationSpec {
  /** The `result` template: what chat shows of a committed proposal's result (the full result stays in the console and the API). */
  renderResult?(ctx: ResultContext): string;
  /** `json`: with no `result` template, chat shows the result as redacted JSON; unset, the outcome only. */
  chatResult?: 'outcome' | 'json';
  approval: {
    approvers: string[];
    quorum: number;
    /** Delays after the proposal at which undecided approvers are pinged again. */
    remindMs: number[];
    escalate?: EscalationSettings;
    /** Who among the approvers may approve a given proposal (src/policy/approver-rule.ts). */
    approverRule?: ApproverRule;
    // And `approval.<platform>`: where each chat platform posts its messages.
  } & ApprovalParts;
  commit: CommitMode;
  /** Evaluated in order at propose time; the first match decides (see src/policy). */
  policy: PolicyRule[];
  grants: GrantSettings | null;
  /** How a policy's or grant's decision shows in chat. */
  automaticDecisions: 'message' | 'silent';
  /** `agp`: the AGP dialect's chat approval runs the business adapter (see src/agp). */
  executor:
    | { type: 'echo' }
    | { type: 'agp' }
    | { type: 'http'; url: string; secret: string; timeoutMs: number }
    | { type: 'mcp'; connection: McpConnection; tool: string };
  /** Set on operations imported from an MCP upstream's tool list (src/mcp/upstreams.ts). */
  upstreamTool?: { upstream: string; tool: string; readOnly: boolean };
  /** A short display name (an upstream tool's own `title`); tools without one show their description's first words. */
  title?: string;
}

/** What twokey does with an argument an upstream tool's schema does not name. */
export type UndeclaredArguments = 'refuse' | 'show';

/** How twokey reaches an MCP server: Streamable HTTP (`url`) or a child process over stdio (`command`). */
export interface McpConnection {
  /** Connections with one name are shared (one stdio process per upstream). */
  name: string;
  url?: string;
  headers?: Record<string, string>;
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  timeoutMs: number;
  maxResponseBytes: number;
}

/** An MCP server whose tools become operations at start (`upstreams:`). */
export interface UpstreamDefinition {
  name: string;
  connection: McpConnection;
  /** For tools that need approval (not read-only, or given an `approval` of their own). */
  defaults: Pick<OperationDefinition, 'expiresInMs' | 'commit' | 'confirmationType'> & {
    approval?: OperationDefinition['approval'];
    undeclaredArguments: UndeclaredArguments;
  };
  /** Whether the server's own `readOnlyHint` may exempt its tools from approval (default: it may not). */
  trustAnnotations: boolean;
  tools: Record<string, UpstreamToolOverride>;
}

export interface UpstreamToolOverride {
  expose: boolean;
  /** true: runs without approval; false: needs approval whatever the server's annotations say. */
  readOnly?: boolean;
  undeclaredArguments?: UndeclaredArguments;
  description?: string;
  summary?: string;
  approval?: OperationDefinition['approval'];
  expiresInMs?: number;
  commit?: OperationDefinition['commit'];
  confirmationType?: OperationDefinition['confirmationType'];
}

export interface TwokeyConfig {
  /** file path (or the name given to parseConfig), for log lines and errors */
  source: string;
  operations: OperationDefinition[];
  /**
   * One human behind several identities: quorum counts people, the owner rule covers all of them.
   * Absent when the file lists none (every identity is then its own person).
   */
  people?: PersonDefinition[];
  /** owned by the AGP module; passed through unvalidated */
  businesses: Record<string, unknown>;
  /** MCP servers whose tools are imported as operations at start (src/mcp/upstreams.ts). */
  upstreams: UpstreamDefinition[];
  /** How people sign in to the web console besides one-time links (an OpenID Connect issuer). */
  console: ConsoleSignInConfig;
}

export type ApproverKind = IdentityKind;

/** What an approver identity names, or undefined when it is not a valid identity (the core's grammar). */
export function approverKind(identity: string): ApproverKind | undefined {
  return identities.parseIdentity(identity)?.kind;
}

/** Checked on the raw data because zod skips refinements once any field has failed. */
function duplicateNameIssues(data: unknown): string[] {
  const operations = typeof data === 'object' && data !== null ? (data as Record<string, unknown>)['operations'] : undefined;
  if (!Array.isArray(operations)) return [];
  const firstIndex = new Map<string, number>();
  return operations.flatMap((operation: unknown, i) => {
    const name = typeof operation === 'object' && operation !== null ? (operation as Record<string, unknown>)['name'] : undefined;
    if (typeof name !== 'string') return [];
    const first = firstIndex.get(name);
    if (first === undefined) firstIndex.set(name, i);
    return first === undefined ? [] : [`operations[${i}].name: duplicate operation name (also operations[${first}])`];
  });
}

const VAR_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Replaces `${VAR}` in every string value, so secrets live in the environment rather than
 * in the file. Unset or empty variables are errors even in unused fields: simpler to reason
 * about than a config whose validity depends on which code path runs.
 */
function substituteEnv(value: unknown, env: NodeJS.ProcessEnv, path: PropertyKey[], issues: string[]): unknown {
  if (typeof value === 'string') {
    return value.replace(VAR_REFERENCE, (reference, name: string) => {
      const replacement = env[name];
      if (replacement === undefined || replacement === '') {
        issues.push(`${formatFieldPath(path) || '(root)'}: environment variable ${name} is not set`);
        return reference;
      }
      return replacement;
    });
  }
  if (Array.isArray(value)) return value.map((item, i) => substituteEnv(item, env, [...path, i], issues));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substituteEnv(item, env, [...path, key], issues)]));
  }
  return value;
}

type ParsedOperation = z.output<typeof operationSchema>;

function buildOperation(parsed: ParsedOperation, index: number, issues: string[]): OperationDefinition | undefined {
  const field = (name: string): string => `operations[${index}].${name}`;
  const problemsBefore = issues.length;
  // If the schema is unusable, templates are still checked against it as written, so one
  // mistake does not bury the report under bogus 'param not declared' lines.
  let paramsSchema: Record<string, unknown> = parsed.params;
  let validateParams: OperationDefinition['validateParams'] = () => [];
  try {
    paramsSchema = closeParamsSchema(parsed.params);
    validateParams = compileParamsSchema(paramsSchema);
  } catch (error) {
    if (!(error instanceof ParamsSchemaError)) throw error;
    issues.push(`${describeSchemaPath(field('params'), error.path)}: ${error.message}`);
  }
  const compile = (name: 'summary' | 'cost', source: string): OperationDefinition['renderSummary'] | undefined => {
    try {
      return compileSummaryTemplate(source, paramsSchema);
    } catch (error) {
      issues.push(`${field(name)}: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
  };
  const renderSummary = compile('summary', parsed.summary);
  const renderCost = parsed.cost === undefined ? undefined : compile('cost', parsed.cost);
  const { approvers, quorum } = parsed.approval;
  const policy = buildPolicy(parsed.policy, { operation: parsed.name, index, paramsSchema, approvers, quorum }, issues);
  const approverRule = buildApproverRule(parsed.approval.approverRule, { operation: parsed.name, path: field('approval.approverRule'), paramsSchema }, issues);
  let renderResult: OperationDefinition['renderResult'];
  try {
    renderResult = parsed.result === undefined ? undefined : compileResultTemplate(parsed.result, paramsSchema);
  } catch (error) {
    issues.push(`${field('result')}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (parsed.result !== undefined && parsed.chatResult === 'json') {
    issues.push(`${field('chatResult')}: the result template already decides what chat shows; remove one of them`);
  }
  if (parsed.stepUp && parsed.grants?.allow) {
    issues.push(`${field('stepUp')}: a grant would approve later proposals without a passkey; remove grants.allow or stepUp`);
  }
  if (issues.length > problemsBefore || renderSummary === undefined) return undefined;

  const executor = parsed.executor;
  return {
    ...operationFieldsOf(parsed),
    paramsSchema,
    validateParams,
    renderSummary,
    ...(renderCost === undefined ? {} : { renderCost }),
    ...(renderResult === undefined ? {} : { renderResult }),
    chatResult: parsed.chatResult,
    expiresInMs: parsed.expiresIn,
    approval: { ...approvalOf(parsed.approval), ...(approverRule ? { approverRule } : {}) },
    policy,
    grants: parsed.grants ?? null,
    automaticDecisions: parsed.automaticDecisions,
    executor:
      executor.type === 'http'
        ? { type: 'http', url: executor.url, secret: executor.secret, timeoutMs: executor.timeout }
        : executor.type === 'mcp'
          ? { type: 'mcp', tool: executor.tool, connection: mcpConnection(`operation:${parsed.name}`, executor) }
          : { type: executor.type },
  };
}

/** The chat platforms' parts a section sets (`slack: { channel }`), by platform name. */
function partsOf(section: object): Record<string, unknown> {
  const values = section as Record<string, unknown>;
  return Object.fromEntries(chatPlatforms.filter((platform) => values[platform.name] !== undefined).map((platform) => [platform.name, values[platform.name]]));
}

/** The approval section as the runtime reads it (durations in ms, reminders in order). */
function approvalOf(parsed: z.output<typeof approvalSchema>): OperationDefinition['approval'] {
  const { approvers, quorum, remind, escalate } = parsed;
  return {
    approvers,
    quorum,
    ...(partsOf(parsed) as ApprovalParts),
    remindMs: [...remind].sort((a, b) => a - b),
    ...(escalate
      ? {
          escalate: {
            afterMs: escalate.after,
            approvers: escalate.approvers,
            ...(partsOf(escalate) as EscalateParts),
          },
        }
      : {}),
  };
}

function mcpConnection(name: string, parsed: z.output<z.ZodObject<typeof mcpConnectionFields>>): McpConnection {
  return {
    name,
    ...(parsed.url !== undefined ? { url: parsed.url, headers: parsed.headers ?? {} } : {}),
    ...(parsed.command !== undefined ? { command: parsed.command, args: parsed.args ?? [], env: parsed.env ?? {} } : {}),
    timeoutMs: parsed.timeout,
    maxResponseBytes: parsed.maxResponseBytes,
  };
}

const toolExpiry = duration('5m', 10_000, 7 * 86_400_000, '10s and 7d');

function buildUpstream(parsed: z.output<typeof upstreamSchema>, index: number, issues: string[]): UpstreamDefinition {
  const tools: Record<string, UpstreamToolOverride> = {};
  // A tool's params are known only once its server answers, after the config is read.
  if (parsed.approval?.approverRule) issues.push(`upstreams[${index}].approval.approverRule: approver rules are for operations, not upstream tools`);
  for (const [tool, override] of Object.entries(parsed.tools)) {
    if (override.approval?.approverRule)
      issues.push(`upstreams[${index}].tools.${tool}.approval.approverRule: approver rules are for operations, not upstream tools`);
    let expiresInMs: number | undefined;
    if (override.expiresIn !== undefined) {
      const checked = toolExpiry.safeParse(override.expiresIn);
      if (checked.success) expiresInMs = checked.data;
      else issues.push(`upstreams[${index}].tools.${tool}.expiresIn: expected a duration between 10s and 7d, such as 5m`);
    }
    tools[tool] = {
      expose: override.expose,
      ...(override.readOnly !== undefined ? { readOnly: override.readOnly } : {}),
      ...(override.undeclaredArguments !== undefined ? { undeclaredArguments: override.undeclaredArguments } : {}),
      ...(override.description !== undefined ? { description: override.description } : {}),
      ...(override.summary !== undefined ? { summary: override.summary } : {}),
      ...(override.approval ? { approval: approvalOf(override.approval) } : {}),
      ...(expiresInMs !== undefined ? { expiresInMs } : {}),
      ...(override.commit ? { commit: override.commit } : {}),
      ...(override.confirmationType ? { confirmationType: override.confirmationType } : {}),
    };
  }
  return {
    name: parsed.name,
    connection: mcpConnection(`upstream:${parsed.name}`, parsed),
    defaults: {
      expiresInMs: parsed.expiresIn,
      commit: parsed.commit,
      confirmationType: parsed.confirmationType,
      ...(parsed.approval ? { approval: approvalOf(parsed.approval) } : {}),
      undeclaredArguments: parsed.undeclaredArguments,
    },
    trustAnnotations: parsed.trustAnnotations,
    tools,
  };
}

/** Parses and validates a config (YAML or JSON text). Throws one ConfigError listing every problem. */
export function parseConfig(text: string, env: NodeJS.ProcessEnv, sourceName: string): TwokeyConfig {
  const heading = `Invalid config file ${sourceName}:`;
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length > 0) {
    throw new ConfigError(
      heading,
      document.errors.map((error) => `YAML: ${error.message.split('\n')[0] ?? ''}`),
    );
  }
  const raw: unknown = document.toJS() ?? {};
  const issues: string[] = [];
  const data = substituteEnv(raw, env, [], issues);
  if (issues.length > 0) throw new ConfigError(heading, issues);

  const result = configSchema.safeParse(data, { error: configErrorMap });
  issues.push(...(result.success ? [] : describeIssues(result.error.issues)), ...duplicateNameIssues(data));
  if (!result.success || issues.length > 0) throw new ConfigError(heading, issues);
  issues.push(...peopleIssues(result.data.people), ...quorumIssues(result.data.operations, result.data.people));
  if (issues.length > 0) throw new ConfigError(heading, issues);

  const operations = result.data.operations.map((operation, i) => buildOperation(operation, i, issues));
  const upstreams = result.data.upstreams.map((upstream, i) => buildUpstream(upstream, i, issues));
  const consoleConfig = buildConsoleConfig(result.data.console, env, issues);
  if (issues.length > 0) throw new ConfigError(heading, issues);
  return {
    source: sourceName,
    operations: operations.filter((operation): operation is OperationDefinition => operation !== undefined),
    ...(result.data.people.length > 0 ? { people: result.data.people } : {}),
    businesses: result.data.businesses,
    upstreams,
    console: consoleConfig,
  };
}

export function loadConfigFile(path: string, env: NodeJS.ProcessEnv): TwokeyConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : '';
    const reason = code ? systemErrorText(code) : 'unreadable';
    throw new ConfigError(`cannot read the config file ${path} (TWOKEY_CONFIG): ${reason}`, []);
  }
  return parseConfig(text, env, path);
}

export const EXAMPLE_CONFIG_PATH = fileURLToPath(new URL('../../twokey.example.yaml', import.meta.url));

/** TWOKEY_CONFIG, else ./twokey.config.yaml in the working directory, else the shipped example. */
export function resolveConfigPath(env: { TWOKEY_CONFIG?: string | undefined }, cwd: string = process.cwd()): string {
  if (env.TWOKEY_CONFIG !== undefined && env.TWOKEY_CONFIG !== '') return resolve(cwd, env.TWOKEY_CONFIG);
  const local = resolve(cwd, 'twokey.config.yaml');
  return existsSync(local) ? local : EXAMPLE_CONFIG_PATH;
}
