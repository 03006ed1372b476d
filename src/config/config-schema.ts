import * as z from 'zod';
import { operationFieldsSchema } from '../core/model.js';
import { WEB_NAME } from '../core/identity.js';
import { chatPlatforms, identities } from '../platforms/index.js';
import { parseDuration } from '../lib/duration.js';
import { formatFieldPath } from './errors.js';
import { consoleSchema } from './console-config.js';
import { policySchemas } from './policy-config.js';

/**
 * The shape of the config file, as zod schemas with messages a person can act on. The checks that
 * span fields and build what the runtime uses (templates, params schemas, people) are in
 * config-file.ts.
 */

/** A zod string check with the identity grammar (the core's and every platform's forms); `person` refuses groups and roles. */
const identityString = (options: { person?: boolean } = {}) =>
  z.string({ error: `expected ${identities.IDENTITY_FORMS}` }).superRefine((text, ctx) => {
    const problem = identities.identityProblem(text, options);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const POSITIVE_INTEGER = 'expected a positive integer';

export function duration(defaultText: string, minMs: number, maxMs: number, range: string) {
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

const httpUrl = z.string().refine(
  (text) => {
    try {
      return ['http:', 'https:'].includes(new URL(text).protocol);
    } catch {
      return false;
    }
  },
  { error: 'expected an http:// or https:// URL' },
);

const automatic = policySchemas(identityString());

export const approvalSchema = z
  .strictObject({
    approvers: z.array(identityString()).min(1, { error: 'expected at least one approver' }),
    quorum: z.int({ error: POSITIVE_INTEGER }).min(1, { error: POSITIVE_INTEGER }).default(1),
    // `approval.<platform>`: where its messages go, in the platform's own shape.
    ...Object.fromEntries(chatPlatforms.map((platform) => [platform.name, platform.approvalPart.optional()])),
    remind: automatic.remind,
    escalate: automatic.escalate,
    approverRule: automatic.approverRule,
  })
  .superRefine((approval, ctx) => {
    const seen = new Set<string>();
    approval.approvers.forEach((identity, i) => {
      if (seen.has(identity)) ctx.addIssue({ code: 'custom', path: ['approvers', i], message: 'duplicate approver' });
      seen.add(identity);
    });
  })
  .transform(withImpliedParts);

/**
 * An `email:` approver is mailed without `approval.email: {}` written beside it: a platform that
 * reaches each approver directly is on for every operation naming one of its approvers (or an
 * escalation's), so no approver listed is silently never asked.
 */
function withImpliedParts<Approval extends { approvers: string[]; escalate?: { approvers: string[] } | undefined }>(approval: Approval): Approval {
  const named = [...approval.approvers, ...(approval.escalate?.approvers ?? [])];
  const implied: Record<string, unknown> = {};
  for (const platform of chatPlatforms) {
    if (!('reachesApproversDirectly' in platform) || !platform.reachesApproversDirectly || (approval as Record<string, unknown>)[platform.name] !== undefined)
      continue;
    if (named.some((identity) => platform.identityForms.some((form) => identity.startsWith(form.prefix)))) {
      implied[platform.name] = platform.approvalPart.parse({});
    }
  }
  return Object.keys(implied).length === 0 ? approval : { ...approval, ...implied };
}

const stringMap = z.record(z.string(), z.string());
const DEFAULT_MCP_MAX_RESPONSE_BYTES = 1024 * 1024;

/** Shared by `executor: { type: mcp }` and `upstreams:`: exactly one of `url` (Streamable HTTP) or `command` (stdio). */
export const mcpConnectionFields = {
  url: httpUrl.optional(),
  headers: stringMap.optional(),
  command: z.string().min(1).optional(),
  args: z.array(z.string()).optional(),
  env: stringMap.optional(),
  timeout: duration('30s', 1_000, 300_000, '1s and 5m'),
  maxResponseBytes: z
    .int({ error: POSITIVE_INTEGER })
    .min(1_024, { error: 'expected at least 1024' })
    .max(64 * 1024 * 1024, { error: 'expected at most 67108864' })
    .default(DEFAULT_MCP_MAX_RESPONSE_BYTES),
};

function oneTransport(
  connection: { url?: string | undefined; command?: string | undefined; headers?: unknown; args?: unknown; env?: unknown },
  ctx: z.core.$RefinementCtx,
): void {
  if ((connection.url === undefined) === (connection.command === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['url'], message: 'expected either url (Streamable HTTP) or command (stdio), not both' });
  }
  if (connection.url !== undefined && (connection.args !== undefined || connection.env !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['args'], message: 'args and env are for a stdio command, not a url' });
  }
  if (connection.command !== undefined && connection.headers !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['headers'], message: 'headers are for a url, not a stdio command' });
  }
}

/** `refuse`: an argument the tool's schema does not name is refused; `show`: accepted and named in the summary ("and also …"). */
const undeclaredArguments = z.enum(['refuse', 'show']);

const upstreamToolSchema = z
  .strictObject({
    expose: z.boolean().default(true),
    // The operator's word that the tool changes nothing: only then does it run without approval.
    readOnly: z.boolean().optional(),
    undeclaredArguments: undeclaredArguments.optional(),
    description: z.string().optional(),
    summary: z.string().min(1, { error: 'expected a non-empty template' }).optional(),
    approval: approvalSchema.optional(),
    expiresIn: z.string().optional(),
    commit: z.enum(['on_approve', 'agent']).optional(),
    confirmationType: z.enum(['payment', 'approval', 'verification']).optional(),
  })
  .superRefine((tool, ctx) => {
    if (tool.readOnly === true && tool.approval !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['readOnly'], message: 'a read-only tool runs without approval: set readOnly: true or an approval, not both' });
    }
  });

export const upstreamSchema = z
  .strictObject({
    name: z.string().regex(/^[a-z][a-z0-9_]{0,31}$/, { error: 'expected lower_snake_case starting with a letter, at most 32 characters' }),
    ...mcpConnectionFields,
    approval: approvalSchema.optional(),
    expiresIn: duration('5m', 10_000, 7 * 86_400_000, '10s and 7d'),
    commit: z.enum(['on_approve', 'agent']).default('on_approve'),
    confirmationType: z.enum(['payment', 'approval', 'verification']).default('approval'),
    // MCP tool annotations are hints from the server: a hostile one can call anything read-only.
    trustAnnotations: z.boolean().default(false),
    undeclaredArguments: undeclaredArguments.default('refuse'),
    tools: z.record(z.string(), upstreamToolSchema).default({}),
  })
  .superRefine(oneTransport);

const plain = operationFieldsSchema.shape;

/**
 * The core's plain fields (src/core/model.ts) are added at the end (`extend`), so a new one is parsed
 * with no edit here; the ones named below only keep their place, and so the order of the error lines.
 */
export const operationSchema = z
  .strictObject({
    name: plain.name,
    description: plain.description,
    confirmationType: plain.confirmationType,
    params: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
    summary: z.string().min(1, { error: 'expected a non-empty template' }),
    cost: z.string().min(1, { error: 'expected a non-empty template' }).optional(),
    result: z.string().min(1, { error: 'expected a non-empty template' }).optional(),
    chatResult: z.enum(['outcome', 'json']).default('outcome'),
    expiresIn: duration('5m', 10_000, 7 * 86_400_000, '10s and 7d'),
    approval: approvalSchema,
    commit: plain.commit,
    policy: automatic.policy,
    grants: automatic.grants,
    automaticDecisions: automatic.automaticDecisions,
    stepUp: plain.stepUp,
    executor: z.discriminatedUnion('type', [
      z.strictObject({ type: z.literal('echo') }),
      z.strictObject({ type: z.literal('agp') }),
      z.strictObject({
        type: z.literal('http'),
        url: httpUrl,
        secret: z.string().min(16, { error: 'expected at least 16 characters' }),
        timeout: duration('10s', 1_000, 300_000, '1s and 5m'),
      }),
      z
        .strictObject({ type: z.literal('mcp'), tool: z.string().min(1, { error: 'expected the upstream tool name' }), ...mcpConnectionFields })
        .superRefine(oneTransport),
    ]),
  })
  .extend(plain);

const personSchema = z.strictObject({
  name: z.string().regex(WEB_NAME, { error: 'expected 1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit' }),
  identities: z.array(identityString({ person: true })).min(1, { error: 'expected at least one identity' }),
});

export const configSchema = z.strictObject({
  console: consoleSchema,
  people: z.array(personSchema).default([]),
  operations: z.array(operationSchema).default([]),
  businesses: z.record(z.string(), z.unknown()).default({}),
  upstreams: z.array(upstreamSchema).default([]),
});

const ARTICLE: Record<string, string> = { object: 'an object', array: 'an array', int: 'an integer', integer: 'an integer' };

/**
 * Used only where a schema has no message of its own. zod's default texts quote inputs
 * (which may be substituted secrets) and read like stack traces.
 */
export const configErrorMap: z.core.$ZodErrorMap = (issue) => {
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

export function describeIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => `${formatFieldPath([...issue.path, key])}: unknown key`)
      : [`${formatFieldPath(issue.path) || '(root)'}: ${issue.message}`],
  );
}
