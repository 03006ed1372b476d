import * as z from 'zod';
import type { OperationDefinition } from '../config/config-file.js';
import { parseDuration } from '../lib/duration.js';
import { ConfigError, formatFieldPath } from '../config/errors.js';
import { createEchoAdapter } from './adapters/echo.js';
import { createHttpAdapter } from './adapters/http.js';
import type { Adapter } from './adapters/types.js';

/**
 * The `businesses:` section of the config file: which businesses agents reach over AGP, through
 * which adapter, with which credentials, and whether a human approves each execute. Parsed here,
 * once, at start; a bad entry stops start with a message naming the field.
 */

export interface BusinessCredentials {
  /** Added to every request towards `origins`; values come from `${VAR}` references in the file. */
  headers: Record<string, string>;
  origins: string[];
}

export interface BusinessDefinition {
  id: string;
  name: string;
  adapterType: 'echo' | 'http';
  adapter: Adapter;
  credentials: BusinessCredentials;
  timeoutMs: number;
  /**
   * Where this business reads the amount it charges, as JSON pointers into the execute request
   * (cents); null = every value under a key that names an amount (see policy.ts).
   */
  amounts: string[] | null;
  /** The operation whose approvers decide on this business's executes; null = no human step. */
  approval: { operation: string } | null;
}

export type BusinessDirectory = ReadonlyMap<string, BusinessDefinition>;

export const ECHO_BUSINESS_ID = 'echo';
const BUSINESS_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
// RFC 9110 token characters: anything else cannot be a header name.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const DEFAULT_TIMEOUT = '10s';

function isHttpUrl(text: string): boolean {
  try {
    return ['http:', 'https:'].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

const httpUrl = z.string({ error: 'expected an http:// or https:// URL' }).refine(isHttpUrl, { error: 'expected an http:// or https:// URL' });

const timeout = z
  .string({ error: 'expected a duration between 1s and 2m, such as 10s' })
  .default(DEFAULT_TIMEOUT)
  .transform((text, ctx) => {
    let ms = Number.NaN;
    try {
      ms = parseDuration(text);
    } catch {
      // reported below
    }
    if (!(ms >= 1_000 && ms <= 120_000)) {
      ctx.addIssue({ code: 'custom', message: 'expected a duration between 1s and 2m, such as 10s' });
      return z.NEVER;
    }
    return ms;
  });

// Messages never quote values: after `${VAR}` substitution they may be secrets.
const common = {
  name: z.string({ error: 'expected a string' }).min(1, { error: 'expected a non-empty string' }).optional(),
  amounts: z
    .array(
      z
        .string({ error: 'expected a JSON pointer, such as /order/amount_cents' })
        .regex(/^(\/([^~/]|~[01])*)+$/, { error: 'expected a JSON pointer, such as /order/amount_cents' }),
      { error: 'expected a list of JSON pointers, such as [/order/amount_cents]' },
    )
    .min(1, { error: 'expected at least one JSON pointer' })
    .optional(),
  approval: z
    .strictObject({ operation: z.string({ error: 'expected the name of an operation' }).min(1, { error: 'expected the name of an operation' }) })
    .optional(),
};

const businessSchema = z.discriminatedUnion(
  'adapter',
  [
    z.strictObject({ adapter: z.literal('echo'), ...common }),
    z.strictObject({
      adapter: z.literal('http'),
      ...common,
      url: httpUrl,
      timeout,
      credentials: z
        .strictObject({
          headers: z
            .record(
              z.string().regex(HEADER_NAME, { error: 'expected a header name' }),
              z.string({ error: 'expected a string, such as "Bearer ${JOES_PIZZA_TOKEN}"' }).min(1, { error: 'expected a non-empty string' }),
            )
            .default({}),
          origins: z.array(httpUrl).optional(),
        })
        .optional(),
    }),
  ],
  { error: 'expected adapter: echo or adapter: http' },
);

function describeIssues(id: string, issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.flatMap((issue) => {
    const path = ['businesses', id, ...issue.path];
    if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => `${formatFieldPath([...path, key])}: unknown key`);
    const message = issue.code === 'invalid_type' && issue.input === undefined ? 'required' : issue.message;
    return [`${formatFieldPath(path)}: ${message}`];
  });
}

function approvalIssues(id: string, name: string, operations: readonly OperationDefinition[]): string[] {
  const field = formatFieldPath(['businesses', id, 'approval', 'operation']);
  const operation = operations.find((candidate) => candidate.name === name);
  if (!operation) return [`${field}: no operation named "${name}" under operations`];
  const issues: string[] = [];
  // on_approve would run the operation at the click, with no agent request to run.
  if (operation.commit !== 'agent')
    issues.push(`${field}: operation "${name}" must have commit: agent (the agent executes through /agp/execute once approved)`);
  if ((operation.executor as { type: string }).type !== 'agp') {
    issues.push(`${field}: operation "${name}" must have executor: { type: agp } (the business runs it, not an executor of its own)`);
  }
  const declared = operation.paramsSchema['properties'];
  const properties = typeof declared === 'object' && declared !== null ? Object.keys(declared) : [];
  if (!properties.includes('businessId') || !properties.includes('request')) {
    issues.push(`${field}: the params of operation "${name}" must declare businessId and request (a proposal's params are { businessId, request })`);
  }
  return issues;
}

/**
 * Builds the business directory. The built-in `echo` business is always there unless the file
 * defines one of its own under that id (to add an approval step to it, say).
 */
export function parseBusinesses(raw: Record<string, unknown>, operations: readonly OperationDefinition[], source = 'config'): BusinessDirectory {
  const issues: string[] = [];
  const directory = new Map<string, BusinessDefinition>();
  for (const [id, entry] of Object.entries(raw)) {
    if (!BUSINESS_ID.test(id)) {
      issues.push(`${formatFieldPath(['businesses', id])}: a business id is 1-64 letters, digits, "_", "-" or ".", starting with a letter or digit`);
      continue;
    }
    const parsed = businessSchema.safeParse(entry ?? {});
    if (!parsed.success) {
      issues.push(...describeIssues(id, parsed.error.issues));
      continue;
    }
    const business = parsed.data;
    if (business.approval) issues.push(...approvalIssues(id, business.approval.operation, operations));
    const approval = business.approval ? { operation: business.approval.operation } : null;
    const amounts = business.amounts ?? null;
    if (business.adapter === 'echo') {
      directory.set(id, {
        id,
        name: business.name ?? 'Echo Labs',
        adapterType: 'echo',
        adapter: createEchoAdapter(),
        credentials: { headers: {}, origins: [] },
        timeoutMs: parseDuration(DEFAULT_TIMEOUT),
        amounts,
        approval,
      });
      continue;
    }
    const headers = business.credentials?.headers ?? {};
    directory.set(id, {
      id,
      name: business.name ?? id,
      adapterType: 'http',
      adapter: createHttpAdapter({ businessId: id, url: business.url }),
      credentials: {
        headers,
        // By default the credentials go to the business's own origin and nowhere else.
        origins: (business.credentials?.origins ?? [business.url]).map((url) => new URL(url).origin),
      },
      timeoutMs: business.timeout,
      amounts,
      approval,
    });
  }
  if (issues.length > 0) throw new ConfigError(`Invalid config file ${source}:`, issues);
  if (!directory.has(ECHO_BUSINESS_ID)) {
    directory.set(ECHO_BUSINESS_ID, {
      id: ECHO_BUSINESS_ID,
      name: 'Echo Labs',
      adapterType: 'echo',
      adapter: createEchoAdapter(),
      credentials: { headers: {}, origins: [] },
      timeoutMs: parseDuration(DEFAULT_TIMEOUT),
      amounts: null,
      approval: null,
    });
  }
  return directory;
}
