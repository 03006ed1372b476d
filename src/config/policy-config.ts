import * as z from 'zod';
import { compileApproverRule, type ApproverRule, type ApproverRuleDefinition } from '../policy/approver-rule.js';
import { ConditionError } from '../policy/condition.js';
import { compilePolicy, policyRuleSchema, type PolicyRule } from '../policy/rules.js';
import { parseDuration } from '../lib/duration.js';
import type { EscalateParts } from '../core/chat-platform.js';
import { chatPlatforms, identities } from '../platforms/index.js';

/**
 * The config keys of automatic decisions: `policy:` rules, `grants:`, and `approval.remind` /
 * `approval.escalate`. Kept apart from config-file.ts so the operation schema only gains a few
 * lines; `approverIdentity` comes from there so identities have one grammar.
 */

const durationText = (min: number, max: number, range: string) =>
  z.string({ error: `expected a duration between ${range}, such as 1h` }).transform((text, ctx) => {
    let ms = Number.NaN;
    try {
      ms = parseDuration(text);
    } catch {
      // reported below
    }
    if (!(ms >= min && ms <= max)) {
      ctx.addIssue({ code: 'custom', message: `expected a duration between ${range}, such as 1h` });
      return z.NEVER;
    }
    return ms;
  });

const MINUTE = 60_000;
const DAY = 86_400_000;

export function policySchemas(approverIdentity: z.ZodType<string>) {
  const rule = policyRuleSchema(approverIdentity);
  const grants = z
    .strictObject({
      allow: z.boolean().default(false),
      maxDuration: durationText(MINUTE, 30 * DAY, '1m and 30d').default(8 * 60 * MINUTE),
      durations: z
        .array(durationText(MINUTE, 30 * DAY, '1m and 30d'))
        .min(1)
        .max(5)
        .optional(),
    })
    .superRefine((value, ctx) => {
      value.durations?.forEach((ms, i) => {
        if (ms > value.maxDuration) ctx.addIssue({ code: 'custom', path: ['durations', i], message: 'longer than maxDuration' });
      });
    })
    .transform((value) => ({
      allow: value.allow,
      maxDurationMs: value.maxDuration,
      durationsMs: value.durations ?? [15 * MINUTE, 60 * MINUTE, value.maxDuration].filter((ms, i, all) => ms <= value.maxDuration && all.indexOf(ms) === i),
    }));
  const remind = z.array(durationText(MINUTE, 7 * DAY, '1m and 7d')).max(10);
  const escalate = z.strictObject({
    after: durationText(MINUTE, 7 * DAY, '1m and 7d'),
    approvers: z.array(approverIdentity).min(1, { error: 'expected at least one approver' }),
    // `escalate.<platform>`: where the escalation is also posted, in the platform's own shape.
    ...Object.fromEntries(chatPlatforms.map((platform) => [platform.name, platform.escalatePart.optional()])),
  });
  const approverRule = z.strictObject({
    when: z.string().min(1, { error: 'expected a CEL expression' }),
    reason: z.string().min(1).max(500).optional(),
  });
  return {
    policy: z.array(rule).max(100).default([]),
    approverRule: approverRule.optional(),
    grants: grants.optional(),
    /** How a policy's or grant's decision shows in chat: a compact message, or none. */
    automaticDecisions: z.enum(['message', 'silent']).default('message'),
    remind: remind.default([]),
    escalate: escalate.optional(),
  };
}

export type GrantSettings = NonNullable<z.output<ReturnType<typeof policySchemas>['grants']>>;
export type EscalationSettings = { afterMs: number; approvers: string[] } & EscalateParts;

export function buildPolicy(
  definitions: Parameters<typeof compilePolicy>[0],
  context: { operation: string; index: number; paramsSchema: Record<string, unknown>; approvers: readonly string[]; quorum: number },
  issues: string[],
): PolicyRule[] {
  const rules = compilePolicy(
    definitions,
    { operation: context.operation, path: `operations[${context.index}].policy`, paramsSchema: context.paramsSchema },
    issues,
  );
  for (const rule of rules) {
    const approvers = rule.approvers ?? context.approvers;
    const individuals = approvers.filter((identity) => {
      const kind = identities.parseIdentity(identity)?.kind;
      return kind === undefined || identities.isPersonKind(kind);
    });
    if (rule.quorum !== undefined && individuals.length === approvers.length && rule.quorum > new Set(individuals).size) {
      issues.push(`${rule.path}.quorum: cannot exceed the number of individual approvers (${new Set(individuals).size})`);
    }
  }
  return rules;
}

/** `approval.approverRule`, compiled at start; a problem is reported as `<path>.when: …`. */
export function buildApproverRule(
  definition: ApproverRuleDefinition | undefined,
  context: { operation: string; path: string; paramsSchema: Record<string, unknown> },
  issues: string[],
): ApproverRule | undefined {
  if (!definition) return undefined;
  try {
    return compileApproverRule(definition, { ...context, groupIdentity: identities.platformGroupPattern });
  } catch (error) {
    if (!(error instanceof ConditionError)) throw error;
    issues.push(`${context.path}.when: ${error.message}`);
    return undefined;
  }
}
