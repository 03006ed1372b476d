import type { CelEnv } from '@bufbuild/cel';
import { ConditionError, describe, loadCel, referenceProblems, verdictOf, type ConditionVerdict } from './condition.js';
import { declaredParamNames, sampleParams } from './rules.js';

/**
 * `approval.approverRule`: who among an operation's approvers may approve one proposal, as a CEL
 * condition over the person clicking and the proposal. It narrows the approvers list, never widens
 * it: the list (by name, group or role) is checked first, then this rule. Evaluated at every click
 * and again under the proposal's row lock. Only a real `true` lets the approval through: `false`,
 * an evaluation error or a non-boolean refuses (fail closed), with the rule's reason.
 */

/** The person clicking, as the rule reads them. */
export interface ApproverFacts {
  /** The identity that clicked: `slack:U…`, `discord:user:…`, `web:NAME`, `oidc:…`. */
  identity: string;
  /** Their person's name in `people:`, else the identity itself. */
  person: string;
  /** Groups the channel knows them by: the issuer's groups claim, Slack user groups, Discord roles. */
  groups: readonly string[];
}

export interface ApproverRuleInput {
  approver: ApproverFacts;
  agent: string;
  /** The agent's owners, each as a person (name, or identity when listed under no person). */
  owners: readonly string[];
  operation: string;
  params: Record<string, unknown>;
}

export interface ApproverRule {
  source: string;
  /** Shown to the person refused; defaults to a sentence quoting the rule. */
  reason: string;
  /**
   * Group identities the rule names (`"slack:group:S0FIN" in approver.groups`): a channel that learns
   * groups by asking (Slack's user groups) asks about these too, or the rule would never see them.
   */
  mentionedGroups: string[];
  evaluate(input: ApproverRuleInput): ConditionVerdict;
}

export interface ApproverRuleDefinition {
  when: string;
  reason?: string | undefined;
}

/** The names an approver rule reads. */
const VARIABLE_NAMES = ['approver', 'agent', 'owners', 'operation', 'params'] as const;
let environment: CelEnv | undefined;

/** Built with the first approver rule, as CEL itself loads (see `loadCel`). */
function approverEnvironment(): CelEnv {
  if (environment) return environment;
  const { celEnv, CelScalar, listType, mapType } = loadCel();
  return (environment = celEnv({
    variables: {
      approver: mapType(CelScalar.STRING, CelScalar.DYN),
      agent: CelScalar.STRING,
      owners: listType(CelScalar.STRING),
      operation: CelScalar.STRING,
      params: mapType(CelScalar.STRING, CelScalar.DYN),
    } satisfies Record<(typeof VARIABLE_NAMES)[number], unknown>,
  }));
}

const NAMES = { names: new Set<string>(VARIABLE_NAMES), listed: 'approver, agent, owners, operation and params' };
const APPROVER_FIELDS = new Set(['identity', 'person', 'groups']);

/**
 * Compiles an approver rule at start: syntax, names, declared params, `approver.<field>`, and a
 * trial run on typed sample params (when the schema gives one) that must answer a boolean.
 * Throws ConditionError with a one-line reason.
 */
export function compileApproverRule(
  definition: ApproverRuleDefinition,
  context: {
    operation: string;
    paramsSchema: Record<string, unknown>;
    /** The chat platforms' group identities (a global pattern): those the rule names are `mentionedGroups`. */
    groupIdentity: RegExp;
  },
): ApproverRule {
  const { parse, plan } = loadCel();
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(definition.when);
  } catch (error) {
    throw new ConditionError(`not a CEL expression: ${describe(error)}`);
  }
  const { problems, countWindows } = referenceProblems(parsed.expr, {
    declaredParams: declaredParamNames(context.paramsSchema),
    variables: NAMES,
    knownFields: { approver: APPROVER_FIELDS },
  });
  if (countWindows.length > 0) problems.push('count_last belongs to policy rules, not to an approver rule');
  if (problems.length > 0) throw new ConditionError(problems.join('; '));
  const program = plan(approverEnvironment(), parsed);
  const evaluate = (input: ApproverRuleInput): ConditionVerdict =>
    verdictOf(() =>
      program({
        approver: { identity: input.approver.identity, person: input.approver.person, groups: [...input.approver.groups] } as never,
        agent: input.agent,
        owners: [...input.owners],
        operation: input.operation,
        params: input.params as never,
      }),
    );
  const params = sampleParams(context.paramsSchema);
  if (params) {
    const trial = evaluate({
      approver: { identity: 'web:sample', person: 'sample', groups: [] },
      agent: 'agent',
      owners: [],
      operation: context.operation,
      params,
    });
    if (trial.kind === 'undecided') throw new ConditionError(trial.error);
  }
  return {
    source: definition.when,
    reason: definition.reason ?? `the approver rule of ${context.operation} (${definition.when}) does not allow you`,
    mentionedGroups: [...new Set(definition.when.match(context.groupIdentity) ?? [])],
    evaluate,
  };
}

/** The verdict at a click, explained: allowed only on a real `true`. */
export function approverRuleAllows(rule: ApproverRule, input: ApproverRuleInput): { allowed: true } | { allowed: false; reason: string; error?: string } {
  const verdict = rule.evaluate(input);
  if (verdict.kind === 'match') return { allowed: true };
  if (verdict.kind === 'undecided') return { allowed: false, reason: rule.reason, error: verdict.error };
  return { allowed: false, reason: rule.reason };
}

/**
 * The rule's input from what a click knows: identities become people's names through `nameOf`
 * (the approver's and the agent's owners'), so "never the person who owns the agent" holds across
 * all of a person's identities. One builder for the click (src/core) and `twokey policy test`.
 */
export function approverRuleInputOf(
  facts: {
    approver: { identity: string; groups: readonly string[] };
    agent: { name: string; owners: readonly string[] };
    operation: string;
    params: Record<string, unknown>;
  },
  nameOf: (identity: string) => string | null,
): ApproverRuleInput {
  const asPerson = (identity: string): string => nameOf(identity) ?? identity;
  return {
    approver: { identity: facts.approver.identity, person: asPerson(facts.approver.identity), groups: [...facts.approver.groups] },
    agent: facts.agent.name,
    owners: facts.agent.owners.map(asPerson),
    operation: facts.operation,
    params: facts.params,
  };
}
