import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import * as z from 'zod';
import { parseDuration } from './duration.js';
import { ConfigError, formatFieldPath } from './errors.js';
import { closeParamsSchema, compileParamsSchema, describeSchemaPath, ParamsSchemaError } from './params-schema.js';
import type { ParamError } from './params-schema.js';
import { compileSummaryTemplate } from './summary-template.js';
import type { SummaryContext } from './summary-template.js';

export type { ParamError } from './params-schema.js';
export type { SummaryContext } from './summary-template.js';

// The result types below are plain data and functions, so other modules can import them
// (with `import type`) without depending on zod, ajv or liquidjs.
export type ConfirmationType = 'payment' | 'approval' | 'verification';

export interface OperationDefinition {
  name: string;
  description: string;
  confirmationType: ConfirmationType;
  /** The schema as written plus the forced `additionalProperties: false`; safe to show to agents. */
  paramsSchema: Record<string, unknown>;
  /** `[]` when valid; otherwise every violation. */
  validateParams(params: unknown): ParamError[];
  /** Plain text, not HTML-escaped: each transport escapes for its own markup. */
  renderSummary(ctx: SummaryContext): string;
  renderCost?(ctx: SummaryContext): string;
  expiresInMs: number;
  approval: { approvers: string[]; quorum: number; slack?: { channel: string }; discord?: { channel: string } };
  commit: 'on_approve' | 'agent';
  /** `agp`: the AGP dialect's chat approval runs the business adapter (see src/agp). */
  executor: { type: 'echo' } | { type: 'agp' } | { type: 'http'; url: string; secret: string; timeoutMs: number };
}

export interface TwokeyConfig {
  /** file path (or the name given to parseConfig), for log lines and errors */
  source: string;
  operations: OperationDefinition[];
  /** owned by the AGP module; passed through unvalidated */
  businesses: Record<string, unknown>;
}

export type ApproverKind = 'slack_user' | 'slack_group' | 'discord_user' | 'discord_role' | 'web';

const APPROVER_PATTERNS: ReadonlyArray<[ApproverKind, RegExp]> = [
  ['slack_group', /^slack:group:S[A-Z0-9]{1,31}$/],
  ['slack_user', /^slack:[UW][A-Z0-9]{1,31}$/],
  ['discord_user', /^discord:user:\d{17,20}$/],
  ['discord_role', /^discord:role:\d{17,20}$/],
  ['web', /^web:[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/],
];

/** What an approver identity names, or undefined when it is not a valid identity. */
export function approverKind(identity: string): ApproverKind | undefined {
  return APPROVER_PATTERNS.find(([, pattern]) => pattern.test(identity))?.[0];
}

/** Groups and roles may hold any number of people, so only these bound the quorum. */
function isIndividual(identity: string): boolean {
  const kind = approverKind(identity);
  return kind === 'slack_user' || kind === 'discord_user' || kind === 'web';
}

const POSITIVE_INTEGER = 'expected a positive integer';
const OPERATION_NAME = /^[a-z][a-z0-9_]{0,63}$/;

function duration(defaultText: string, minMs: number, maxMs: number, range: string) {
  const error = `expected a duration between ${range}, such as ${defaultText}`;
  return z
    .string({ error })
    .default(defaultText)
    .transform((text, ctx) => {
      let ms: number;
      try {
        ms = parseDuration(text);
      } catch {
        ms = Number.NaN;
      }
      if (!(ms >= minMs && ms <= maxMs)) {
        ctx.addIssue({ code: 'custom', message: error });
        return z.NEVER;
      }
      return ms;
    });
}

const httpUrl = z.string().refine((text) => {
  try {
    return ['http:', 'https:'].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}, { error: 'expected an http:// or https:// URL' });

const approvalSchema = z
  .strictObject({
    approvers: z
      .array(
        z.string().refine((identity) => approverKind(identity) !== undefined, {
          error: 'expected slack:U…, slack:W…, slack:group:S…, discord:user:<id>, discord:role:<id> or web:<name>',
        }),
      )
      .min(1, { error: 'expected at least one approver' }),
    quorum: z.int({ error: POSITIVE_INTEGER }).min(1, { error: POSITIVE_INTEGER }).default(1),
    slack: z.strictObject({ channel: z.string().min(1, { error: 'expected a Slack channel id' }) }).optional(),
    discord: z
      .strictObject({
        // YAML reads an unquoted 18-digit id as a number and rounds it, hence the hint.
        channel: z.string({ error: 'expected a string: quote Discord ids, e.g. "223456789012345678"' }).regex(/^\d{17,20}$/, {
          error: 'expected a Discord channel id (17 to 20 digits)',
        }),
      })
      .optional(),
  })
  .superRefine((approval, ctx) => {
    const seen = new Set<string>();
    approval.approvers.forEach((identity, i) => {
      if (seen.has(identity)) ctx.addIssue({ code: 'custom', path: ['approvers', i], message: 'duplicate approver' });
      seen.add(identity);
    });
    if (approval.approvers.every(isIndividual) && approval.quorum > seen.size) {
      ctx.addIssue({
        code: 'custom',
        path: ['quorum'],
        message: `cannot exceed the number of individual approvers (${seen.size})`,
      });
    }
  });

const operationSchema = z.strictObject({
  name: z.string().regex(OPERATION_NAME, { error: 'expected lower_snake_case starting with a letter, at most 64 characters' }),
  description: z.string(),
  confirmationType: z.enum(['payment', 'approval', 'verification']).default('approval'),
  params: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
  summary: z.string().min(1, { error: 'expected a non-empty template' }),
  cost: z.string().min(1, { error: 'expected a non-empty template' }).optional(),
  expiresIn: duration('5m', 10_000, 7 * 86_400_000, '10s and 7d'),
  approval: approvalSchema,
  commit: z.enum(['on_approve', 'agent']).default('on_approve'),
  executor: z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('echo') }),
    z.strictObject({ type: z.literal('agp') }),
    z.strictObject({
      type: z.literal('http'),
      url: httpUrl,
      secret: z.string().min(16, { error: 'expected at least 16 characters' }),
      timeout: duration('10s', 1_000, 300_000, '1s and 5m'),
    }),
  ]),
});

const configSchema = z.strictObject({
  operations: z.array(operationSchema).default([]),
  businesses: z.record(z.string(), z.unknown()).default({}),
});

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

const ARTICLE: Record<string, string> = { object: 'an object', array: 'an array', int: 'an integer', integer: 'an integer' };

/**
 * Used only where a schema has no message of its own. zod's default texts quote inputs
 * (which may be substituted secrets) and read like stack traces.
 */
const configErrorMap: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? 'required' : `expected ${ARTICLE[issue.expected] ?? `a ${issue.expected}`}`;
    case 'invalid_value':
      return `expected one of: ${issue.values.map(String).join(', ')}`;
    case 'invalid_union': {
      const options: unknown = 'options' in issue ? issue.options : undefined;
      return Array.isArray(options) ? `expected one of: ${options.map(String).join(', ')}` : 'does not match any allowed form';
    }
    case 'unrecognized_keys':
      return 'unknown key';
    case 'too_small':
      return `expected at least ${String(issue.minimum)}`;
    case 'too_big':
      return `expected at most ${String(issue.maximum)}`;
    default:
      return 'invalid value';
  }
};

function describeIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => `${formatFieldPath([...issue.path, key])}: unknown key`)
      : [`${formatFieldPath(issue.path) || '(root)'}: ${issue.message}`],
  );
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
  if (issues.length > problemsBefore || renderSummary === undefined) return undefined;

  const { approvers, quorum, slack, discord } = parsed.approval;
  const executor = parsed.executor;
  return {
    name: parsed.name,
    description: parsed.description,
    confirmationType: parsed.confirmationType,
    paramsSchema,
    validateParams,
    renderSummary,
    ...(renderCost === undefined ? {} : { renderCost }),
    expiresInMs: parsed.expiresIn,
    approval: { approvers, quorum, ...(slack ? { slack } : {}), ...(discord ? { discord } : {}) },
    commit: parsed.commit,
    executor:
      executor.type === 'http'
        ? { type: 'http', url: executor.url, secret: executor.secret, timeoutMs: executor.timeout }
        : { type: executor.type },
  };
}

/** Parses and validates a config (YAML or JSON text). Throws one ConfigError listing every problem. */
export function parseConfig(text: string, env: NodeJS.ProcessEnv, sourceName: string): TwokeyConfig {
  const heading = `Invalid config file ${sourceName}:`;
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length > 0) {
    throw new ConfigError(heading, document.errors.map((error) => `YAML: ${error.message.split('\n')[0] ?? ''}`));
  }
  const raw: unknown = document.toJS() ?? {};
  const issues: string[] = [];
  const data = substituteEnv(raw, env, [], issues);
  if (issues.length > 0) throw new ConfigError(heading, issues);

  const result = configSchema.safeParse(data, { error: configErrorMap });
  issues.push(...(result.success ? [] : describeIssues(result.error.issues)), ...duplicateNameIssues(data));
  if (!result.success || issues.length > 0) throw new ConfigError(heading, issues);

  const operations = result.data.operations.map((operation, i) => buildOperation(operation, i, issues));
  if (issues.length > 0) throw new ConfigError(heading, issues);
  return {
    source: sourceName,
    operations: operations.filter((operation): operation is OperationDefinition => operation !== undefined),
    businesses: result.data.businesses,
  };
}

export function loadConfigFile(path: string, env: NodeJS.ProcessEnv): TwokeyConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = error instanceof Error && 'code' in error ? String(error.code) : 'unreadable';
    throw new ConfigError(`Cannot read config file ${path}:`, [`TWOKEY_CONFIG: ${reason}`]);
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
