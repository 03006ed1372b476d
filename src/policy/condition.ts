import type * as Cel from '@bufbuild/cel';
import type { CelEnv } from '@bufbuild/cel';
import type { Expr } from '@bufbuild/cel-spec/cel/expr/syntax_pb.js';
import { createRequire } from 'node:module';
import { parseDuration } from '../lib/duration.js';

/**
 * CEL conditions of policy rules: compiled once at start, evaluated at propose time.
 *
 * The one trap of `@bufbuild/cel`: a type mismatch or a missing field does not throw, `run`/`plan`
 * *return* a CelError. Everything here therefore turns the result into a closed verdict —
 * `match`, `no_match` or `undecided` — and only a real `true` is a match. A caller must treat
 * `undecided` as "this rule did not decide", never as a match.
 */

export type ConditionVerdict = { kind: 'match' } | { kind: 'no_match' } | { kind: 'undecided'; error: string };

/** The variables a policy condition reads. */
export interface ConditionInput {
  agent: string;
  operation: string;
  params: Record<string, unknown>;
  /** How many proposals this agent made of this operation in each window `count_last` names (ms → count). */
  recentCounts?: ReadonlyMap<number, number>;
}

export class ConditionError extends Error {
  override readonly name = 'ConditionError';
}

const requireCommonJs = createRequire(import.meta.url);
let cel: typeof Cel | undefined;

/**
 * `@bufbuild/cel`, loaded with the first condition compiled: with `@bufbuild/protobuf` it is over a
 * hundred modules, which a server whose operations have no rule should not load before it answers.
 * Required (its CommonJS build) rather than imported, because a config is compiled synchronously;
 * every use goes through here, so one copy of the library is loaded and `isCelError` knows its errors.
 */
export function loadCel(): typeof Cel {
  return (cel ??= requireCommonJs('@bufbuild/cel') as typeof Cel);
}

/** The names a policy condition reads. */
const VARIABLE_NAMES = ['agent', 'operation', 'params'] as const;

export const COUNT_LAST = 'count_last';
/** Longest window `count_last` may look back: proposals older than this are not worth a scan at every propose. */
const MAX_COUNT_WINDOW_MS = 7 * 86_400_000;

/**
 * `count_last` needs the database, so its answer is looked up before evaluation and handed in
 * through this slot. Safe because evaluation is synchronous: nothing else runs between setting
 * the slot and reading it.
 */
let currentCounts: ReadonlyMap<number, number> | undefined;

let environment: CelEnv | undefined;

/** The CEL environment of policy conditions: their variables and `count_last`. */
function policyEnvironment(): CelEnv {
  if (environment) return environment;
  const { celEnv, celFunc, CelScalar, mapType } = loadCel();
  const variables: Record<(typeof VARIABLE_NAMES)[number], Cel.CelType> = {
    agent: CelScalar.STRING,
    operation: CelScalar.STRING,
    params: mapType(CelScalar.STRING, CelScalar.DYN),
  };
  const countLast = celFunc(COUNT_LAST, [CelScalar.STRING], CelScalar.INT, (window: string) => {
    const ms = parseDuration(window);
    const count = currentCounts?.get(ms);
    // Unknown here means the caller did not look it up: an error, so the rule falls back to a human.
    if (count === undefined) throw new Error(`count_last("${window}") was not looked up`);
    return BigInt(count);
  });
  return (environment = celEnv({ variables, funcs: [countLast] }));
}
/** CEL's type names are identifiers too (`type(x) == int`). */
const TYPE_NAMES = new Set(['int', 'uint', 'double', 'bool', 'string', 'bytes', 'list', 'map', 'null_type', 'type']);

export interface CompiledCondition {
  source: string;
  /** The `count_last` windows this condition uses, in ms. */
  countWindows: number[];
  evaluate(input: ConditionInput): ConditionVerdict;
}

export function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0]?.slice(0, 300) || 'evaluation failed';
}

/** The one place a CEL result becomes a verdict. */
export function verdictOf(evaluate: () => unknown): ConditionVerdict {
  let result: unknown;
  try {
    result = evaluate();
  } catch (error) {
    // The evaluator promises not to throw; if it ever does, the rule still does not decide.
    return { kind: 'undecided', error: describe(error) };
  }
  if (loadCel().isCelError(result)) return { kind: 'undecided', error: describe(result) };
  if (result === true) return { kind: 'match' };
  if (result === false) return { kind: 'no_match' };
  return { kind: 'undecided', error: `the condition returned ${typeof result === 'bigint' ? 'an int' : `a ${typeof result}`}, not a boolean` };
}

export interface ReferenceCheck {
  /** Declared top-level param names; undefined when the schema does not list them. */
  declaredParams?: readonly string[] | undefined;
  /** The names an expression may read, and how an error lists them; default: a policy condition's. */
  variables?: { names: ReadonlySet<string>; listed: string };
  /** Variables whose fields are known (`approver.groups`): any other field is a typo. */
  knownFields?: Readonly<Record<string, ReadonlySet<string>>>;
}

const POLICY_VARIABLES = { names: new Set<string>(VARIABLE_NAMES), listed: 'agent, operation and params' };

/** Names and calls the expression uses that cannot be right whatever the params are. */
export function referenceProblems(root: Expr, check: ReferenceCheck): { problems: string[]; countWindows: number[] } {
  const variables = check.variables ?? POLICY_VARIABLES;
  const problems: string[] = [];
  const countWindows: number[] = [];
  const visit = (expr: Expr | undefined, bound: ReadonlySet<string>): void => {
    if (!expr) return;
    const kind = expr.exprKind;
    switch (kind.case) {
      case 'identExpr':
        if (!variables.names.has(kind.value.name) && !bound.has(kind.value.name) && !TYPE_NAMES.has(kind.value.name)) {
          problems.push(`unknown name "${kind.value.name}" (a condition reads ${variables.listed})`);
        }
        return;
      case 'selectExpr': {
        const operand = kind.value.operand;
        if (operand?.exprKind.case === 'identExpr' && operand.exprKind.value.name === 'params' && !bound.has('params')) {
          const declared = check.declaredParams;
          if (declared && !declared.includes(kind.value.field)) problems.push(`params.${kind.value.field} is not a param of this operation`);
          return;
        }
        const known = operand?.exprKind.case === 'identExpr' ? check.knownFields?.[operand.exprKind.value.name] : undefined;
        if (known && operand?.exprKind.case === 'identExpr' && !bound.has(operand.exprKind.value.name) && !known.has(kind.value.field)) {
          problems.push(`${operand.exprKind.value.name}.${kind.value.field} is not known (it has ${[...known].join(', ')})`);
          return;
        }
        visit(operand, bound);
        return;
      }
      case 'callExpr': {
        if (kind.value.function === COUNT_LAST && !kind.value.target) {
          const [arg] = kind.value.args;
          const literal =
            arg?.exprKind.case === 'constExpr' && arg.exprKind.value.constantKind.case === 'stringValue' ? arg.exprKind.value.constantKind.value : undefined;
          let ms = Number.NaN;
          try {
            ms = literal === undefined ? Number.NaN : parseDuration(literal);
          } catch {
            // reported below
          }
          if (kind.value.args.length !== 1 || !(ms > 0 && ms <= MAX_COUNT_WINDOW_MS)) {
            problems.push(`${COUNT_LAST} takes one duration literal up to 7d, such as ${COUNT_LAST}("1h")`);
          } else {
            countWindows.push(ms);
          }
          return;
        }
        visit(kind.value.target, bound);
        kind.value.args.forEach((arg) => visit(arg, bound));
        return;
      }
      case 'listExpr':
        kind.value.elements.forEach((element) => visit(element, bound));
        return;
      case 'structExpr':
        kind.value.entries.forEach((entry) => {
          if (entry.keyKind.case === 'mapKey') visit(entry.keyKind.value, bound);
          visit(entry.value, bound);
        });
        return;
      case 'comprehensionExpr': {
        const c = kind.value;
        visit(c.iterRange, bound);
        visit(c.accuInit, bound);
        const inner = new Set([...bound, c.iterVar, c.iterVar2, c.accuVar].filter(Boolean));
        visit(c.loopCondition, inner);
        visit(c.loopStep, inner);
        visit(c.result, inner);
        return;
      }
      default:
        return;
    }
  };
  visit(root, new Set());
  return { problems, countWindows: [...new Set(countWindows)] };
}

/**
 * Parses a policy condition and checks it against the operation: syntax, names, declared params,
 * and a trial evaluation on typed sample params (every declared param present), which must give a
 * boolean. The trial catches type mistakes (`agent > 5`, `params.amount_cents < "10"`) and
 * conditions that are not questions (`params.amount_cents + 1`) before the first proposal.
 * Throws ConditionError with a one-line reason.
 */
export function compileCondition(
  source: string,
  options: { declaredParams?: readonly string[] | undefined; sample?: ConditionInput | undefined } = {},
): CompiledCondition {
  const { parse, plan } = loadCel();
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (error) {
    throw new ConditionError(`not a CEL expression: ${describe(error)}`);
  }
  const { problems, countWindows } = referenceProblems(parsed.expr, { declaredParams: options.declaredParams });
  if (problems.length > 0) throw new ConditionError(problems.join('; '));
  const program = plan(policyEnvironment(), parsed);
  const evaluate = (input: ConditionInput): ConditionVerdict => {
    currentCounts = input.recentCounts;
    try {
      return verdictOf(() => program({ agent: input.agent, operation: input.operation, params: input.params as never }));
    } finally {
      currentCounts = undefined;
    }
  };
  if (options.sample) {
    const counts = new Map(countWindows.map((ms) => [ms, 0]));
    const trial = evaluate({ ...options.sample, recentCounts: counts });
    if (trial.kind === 'undecided') throw new ConditionError(trial.error);
  }
  return { source, countWindows, evaluate };
}
