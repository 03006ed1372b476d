import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { operationSchema } from '../../src/config/config-schema.js';
import { operationFieldsOf, operationFieldsSchema } from '../../src/core/model.js';

const yaml = `operations:
  - name: wire_money
    description: Send a wire transfer
    confirmationType: payment
    commit: agent
    stepUp: passkey
    summary: "{{agent}} wants to send money."
    approval:
      approvers: [web:alice]
    executor: { type: echo }
`;

describe("an operation's plain fields are defined once, in the core", () => {
  it('parses every plain field with the core schema itself, so a field added there is read from the file', () => {
    const plainKeys = Object.keys(operationFieldsSchema.shape);
    expect(plainKeys.length).toBeGreaterThan(0);
    for (const key of plainKeys) {
      expect(operationSchema.shape[key as keyof typeof operationSchema.shape], key).toBe(
        operationFieldsSchema.shape[key as keyof typeof operationFieldsSchema.shape],
      );
    }
  });

  it('carries every plain field from the YAML into the OperationSpec unchanged', () => {
    const operation = parseConfig(yaml, {}, 'test.yaml').operations[0];
    expect(operation && operationFieldsOf(operation)).toEqual({
      name: 'wire_money',
      description: 'Send a wire transfer',
      confirmationType: 'payment',
      commit: 'agent',
      stepUp: 'passkey',
    });
    // Every key of the core schema is covered above: a new field fails here until the sample states it.
    expect(Object.keys(operationFieldsSchema.shape).sort()).toEqual(['commit', 'confirmationType', 'description', 'name', 'stepUp']);
  });

  it('copies only the plain fields, and leaves an unset optional one out', () => {
    const fields = operationFieldsOf({ name: 'x', description: 'd', confirmationType: 'approval', commit: 'on_approve', summary: 's' } as never);
    expect(fields).toEqual({ name: 'x', description: 'd', confirmationType: 'approval', commit: 'on_approve' });
    expect(fields).not.toHaveProperty('stepUp');
  });
});
