import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { ConfigError } from '../../src/config/errors.js';

const operation = (extra: string) => `operations:
  - name: delete_workspace
    description: Delete a workspace
    params:
      type: object
      required: [workspace]
      properties:
        workspace: { type: string }
    summary: "{{agent}} wants to delete {{params.workspace}}."
    approval:
      approvers: [web:alice]
    executor: { type: echo }
${extra}`;

function issuesOf(yaml: string): readonly string[] {
  try {
    parseConfig(yaml, {}, 'test.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected parseConfig to throw');
}

describe('stepUp in the config', () => {
  it('reads `stepUp: passkey` on an operation, and leaves it out otherwise', () => {
    expect(parseConfig(operation('    stepUp: passkey\n'), {}, 'test.yaml').operations[0]?.stepUp).toBe('passkey');
    expect(parseConfig(operation(''), {}, 'test.yaml').operations[0]).not.toHaveProperty('stepUp');
  });

  it('names a step-up that does not exist', () => {
    expect(issuesOf(operation('    stepUp: sms\n')).join('\n')).toContain('operations[0].stepUp');
  });

  it('refuses grants on a step-up operation: a grant would approve without a passkey', () => {
    const issues = issuesOf(operation('    stepUp: passkey\n    grants: { allow: true }\n')).join('\n');
    expect(issues).toContain('stepUp');
    expect(issues).toContain('without a passkey');
  });

  it('takes stepUp on a `decide: require` rule, and refuses it on any other', () => {
    const rule = (decide: string) => `    policy:\n      - when: 'params.workspace == "prod"'\n        decide: ${decide}\n        stepUp: passkey\n`;
    expect(parseConfig(operation(rule('require')), {}, 'test.yaml').operations[0]?.policy[0]).toMatchObject({ decide: 'require', stepUp: 'passkey' });
    expect(issuesOf(operation(rule('approve'))).join('\n')).toContain('stepUp belongs to decide: require');
  });
});
