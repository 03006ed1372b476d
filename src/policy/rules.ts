import * as z from 'zod';
import { compileCondition, ConditionError, type CompiledCondition, type ConditionInput, type ConditionVerdict } from './condition.js';

/**
 * Policy rules of one operation: evaluated in order at propose time, the first whose condition is
 * true decides. Pure: no database, no clock. What a decision does to a proposal is the core's job.
 */

export const POLICY_DECISIONS = ['approve', 'deny', 'require'] as const;
export type PolicyDecide = (typeof POLICY_DECISIONS)[number];

export interface PolicyRule {
  index: number;
  /** `operations[2].policy[0]`: how errors and the audit log name the rule. */
  path: string;
  when: CompiledCondition;
  decide: PolicyDecide;
  reason: string | null;
  /** `require` only: the approval this case needs instead of the operation's. */
  quorum?: number;
  approvers?: string[];
  /** `require` only: approvals of this proposal need a passkey assertion (src/core/step-up.ts). */
  stepUp?: 'passkey';
}

/**
 * One rule as the config file writes it (`policy:` of an operation). Approvers are checked with the
 * identity grammar the caller passes (the core's, through src/config).
 */
export function policyRuleSchema(approverIdentity: z.ZodType<string>) {
  return z.strictObject({
    when: z.string().min(1, { error: 'expected a CEL expression' }),
    decide: z.enum(POLICY_DECISIONS),
    reason: z.string().min(1).max(500).optional(),
    quorum: z.int({ error: 'expected a positive integer' }).min(1, { error: 'expected a positive integer' }).optional(),
    approvers: z.array(approverIdentity).min(1, { error: 'expected at least one approver' }).optional(),
    /** With `decide: require`: the approvals of a proposal this rule matched need a passkey. */
    stepUp: z.literal('passkey', { error: 'expected "passkey" (the one step-up there is)' }).optional(),
  });
}

export type PolicyRuleDefinition = z.output<ReturnType<typeof policyRuleSchema>>;

export interface RuleTrace {
  index: number;
  when: string;
  verdict: ConditionVerdict;
}

/** What the rules say about one proposal. */
export type PolicyVerdict =
  | { kind: 'approve' | 'deny'; rule: PolicyRule; reason: string; trace: RuleTrace[] }
  | { kind: 'require'; rule: PolicyRule; reason: string | null; quorum?: number; approvers?: string[]; stepUp?: 'passkey'; trace: RuleTrace[] }
  /** A rule could not be evaluated: the normal human approval, never an automatic yes. */
  | { kind: 'fallback'; rule: PolicyRule; error: string; trace: RuleTrace[] }
  | { kind: 'none'; trace: RuleTrace[] };

/** `policy:<operation>#<index>`: the decider a policy decision is recorded under. */
export const policyDecider = (operation: string, rule: Pick<PolicyRule, 'index'>): string => `policy:${operation}#${rule.index}`;

function defaultReason(rule: PolicyRule): string {
  return rule.decide === 'approve'
    ? `approved by policy rule #${rule.index} (${rule.when.source})`
    : `denied by policy rule #${rule.index} (${rule.when.source})`;
}

export function evaluatePolicy(rules: readonly PolicyRule[], input: ConditionInput): PolicyVerdict {
  const trace: RuleTrace[] = [];
  for (const rule of rules) {
    const verdict = rule.when.evaluate(input);
    trace.push({ index: rule.index, when: rule.when.source, verdict });
    if (verdict.kind === 'no_match') continue;
    if (verdict.kind === 'undecided') return { kind: 'fallback', rule, error: verdict.error, trace };
    if (rule.decide === 'require') {
      return {
        kind: 'require',
        rule,
        reason: rule.reason,
        ...(rule.quorum !== undefined ? { quorum: rule.quorum } : {}),
        ...(rule.approvers !== undefined ? { approvers: rule.approvers } : {}),
        ...(rule.stepUp !== undefined ? { stepUp: rule.stepUp } : {}),
        trace,
      };
    }
    return { kind: rule.decide, rule, reason: rule.reason ?? defaultReason(rule), trace };
  }
  return { kind: 'none', trace };
}

/** Every `count_last` window any rule uses: looked up once per proposal, before evaluation. */
export function countWindowsOf(rules: readonly PolicyRule[]): number[] {
  return [...new Set(rules.flatMap((rule) => rule.when.countWindows))];
}

type JsonSchema = Record<string, unknown>;

const NO_SAMPLE = Symbol('no sample');

/** A value of the schema's type, nested objects included; NO_SAMPLE when it has no single type. */
function sampleOf(schema: JsonSchema): unknown {
  const enumValues = Array.isArray(schema.enum) ? schema.enum : undefined;
  if (enumValues && enumValues.length > 0) return enumValues[0];
  switch (schema.type) {
    case 'integer':
    case 'number':
      return 0;
    case 'string':
      return '';
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object': {
      const properties = schema.properties;
      if (typeof properties !== 'object' || properties === null) return {};
      const sample: Record<string, unknown> = {};
      for (const [name, child] of Object.entries(properties as Record<string, JsonSchema>)) {
        const value = sampleOf(child);
        if (value === NO_SAMPLE) return NO_SAMPLE;
        sample[name] = value;
      }
      return sample;
    }
    default:
      return NO_SAMPLE;
  }
}

/**
 * A value of each declared param's type, so a trial evaluation finds type mistakes at start;
 * undefined when some param has no single type (no trial rather than a false alarm).
 */
export function sampleParams(schema: JsonSchema): Record<string, unknown> | undefined {
  const sample = sampleOf({ ...schema, type: 'object' });
  return sample === NO_SAMPLE ? undefined : (sample as Record<string, unknown>);
}

export function declaredParamNames(schema: JsonSchema): string[] | undefined {
  const properties = schema.properties;
  // A schema that allows other properties gives no list to hold a condition to.
  if (typeof properties !== 'object' || properties === null || schema.additionalProperties !== false) return undefined;
  return Object.keys(properties);
}

/**
 * Compiles the `policy:` list of one operation. Reports each problem as `<path>.when: …` through
 * `issues` (the config's error list) and returns the rules that compiled.
 */
export function compilePolicy(
  definitions: readonly PolicyRuleDefinition[],
  context: { operation: string; path: string; paramsSchema: JsonSchema },
  issues: string[],
): PolicyRule[] {
  const params = sampleParams(context.paramsSchema);
  const sample = params ? { agent: 'agent', operation: context.operation, params } : undefined;
  const declaredParams = declaredParamNames(context.paramsSchema);
  const rules: PolicyRule[] = [];
  definitions.forEach((definition, index) => {
    const path = `${context.path}[${index}]`;
    let when: CompiledCondition;
    try {
      when = compileCondition(definition.when, { declaredParams, sample });
    } catch (error) {
      if (!(error instanceof ConditionError)) throw error;
      issues.push(`${path}.when: ${error.message}`);
      return;
    }
    if (definition.decide !== 'require' && definition.stepUp !== undefined) {
      issues.push(`${path}: stepUp belongs to decide: require (an automatic decision asks nobody for a passkey)`);
      return;
    }
    if (definition.decide !== 'require' && (definition.quorum !== undefined || definition.approvers !== undefined)) {
      issues.push(`${path}: quorum and approvers belong to decide: require`);
      return;
    }
    rules.push({
      index,
      path,
      when,
      decide: definition.decide,
      reason: definition.reason ?? null,
      ...(definition.quorum !== undefined ? { quorum: definition.quorum } : {}),
      ...(definition.approvers !== undefined ? { approvers: definition.approvers } : {}),
      ...(definition.stepUp !== undefined ? { stepUp: definition.stepUp } : {}),
    });
  });
  return rules;
}
