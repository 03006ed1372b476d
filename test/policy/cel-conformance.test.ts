import { tests } from '@bufbuild/cel-spec/testdata/conformance.js';
import { describe, expect, it } from 'vitest';
import { compileCondition, type ConditionVerdict } from '../../src/policy/condition.js';

/**
 * A slice of CEL's own conformance data run through the wrapper policy rules use. The wrapper
 * only ever answers match / no_match / undecided, so the expectation is derived from the spec's:
 * `true` → match, `false` → no_match, an evaluation error or any non-boolean value → undecided
 * (a rule that does not decide, which falls back to human approval).
 */
interface SerializedTest {
  original: {
    name: string;
    expr: string;
    value?: Record<string, unknown>;
    evalError?: unknown;
    typeEnv?: unknown;
    bindings?: unknown;
    container?: string;
    disableCheck?: boolean;
  };
}
interface SerializedSuite {
  name: string;
  suites?: SerializedSuite[];
  tests?: SerializedTest[];
}

const SECTIONS = ['basic', 'comparisons', 'logic'];

function casesOf(suite: SerializedSuite, path: string): Array<[string, SerializedTest['original']]> {
  const own = (suite.tests ?? []).map((test): [string, SerializedTest['original']] => [`${path}/${test.original.name}`, test.original]);
  return [...own, ...(suite.suites ?? []).flatMap((child) => casesOf(child, `${path}/${child.name}`))];
}

const selected = (tests as SerializedSuite)
  .suites!.filter((suite) => SECTIONS.includes(suite.name))
  .flatMap((suite) => casesOf(suite, suite.name))
  // Cases with their own variables, messages or containers need an environment policies do not have.
  .filter(([, test]) => !test.typeEnv && !test.bindings && !test.container);

function expected(test: SerializedTest['original']): ConditionVerdict['kind'] {
  if (test.evalError !== undefined) return 'undecided';
  const value = test.value ?? {};
  if ('boolValue' in value) return value.boolValue === true ? 'match' : 'no_match';
  return 'undecided';
}

function actual(source: string): ConditionVerdict['kind'] | 'refused_at_start' {
  try {
    return compileCondition(source).evaluate({ agent: 'a', operation: 'o', params: {} }).kind;
  } catch {
    return 'refused_at_start';
  }
}

describe('CEL conformance (basic, comparisons, logic) through the policy condition wrapper', () => {
  it('selects a meaningful slice', () => {
    expect(selected.length).toBeGreaterThan(300);
  });

  it.each(selected)('%s', (_name, test) => {
    const verdict = actual(test.expr);
    // Policies check names at start, so an expression the spec runs unchecked (an unbound `x`) may
    // be refused before it runs; only such cases may be.
    if (verdict === 'refused_at_start') expect(test.disableCheck).toBe(true);
    else expect(verdict).toBe(expected(test));
  });
});
