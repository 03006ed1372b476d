import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { ConfigError } from '../../src/config/errors.js';
import { identities } from '../../src/platforms/index.js';

const { parseIdentity, parsePersonIdentity } = identities;

const operation = (approvers: string) => `
operations:
  - name: pay
    description: Pay
    params: { type: object, properties: { to: { type: string } } }
    summary: "{{agent}} pays"
    approval: { approvers: ${approvers} }
    executor: { type: echo }
`;

describe('email: identities and the operations they put on email', () => {
  it('parses an email: identity as one person', () => {
    expect(parseIdentity('email:alice@example.com')).toEqual({ kind: 'email_user', id: 'alice@example.com', text: 'email:alice@example.com' });
    expect(parsePersonIdentity('email:ops+billing@mail.example.co.uk')?.kind).toBe('email_user');
    for (const bad of [
      'email:alice',
      'email:@example.com',
      'email:alice@example',
      'email:a b@example.com',
      'email:<alice@example.com>',
      'email:alice@example.com\r\nBcc: x@y.z',
    ]) {
      expect(parseIdentity(bad)).toBeNull();
    }
  });

  it('mails an operation whose approval has an email part', () => {
    const config = parseConfig(operation('["email:alice@example.com", web:bob], email: {}'), {}, 'test.yaml');
    expect(config.operations[0]?.approval.email).toEqual({});
    const webOnly = parseConfig(operation('[web:bob]'), {}, 'test.yaml');
    expect(webOnly.operations[0]?.approval.email).toBeUndefined();
  });

  it('mails an operation that names an email: approver without an email part: no approver listed is left unasked', () => {
    const implied = parseConfig(operation('["email:alice@example.com", web:bob]'), {}, 'test.yaml');
    expect(implied.operations[0]?.approval.email).toEqual({});
    // An escalation's email: approver puts the operation on email too (its sync mails whom it adds).
    const escalated = parseConfig(operation('[web:bob], escalate: { after: 1h, approvers: ["email:carol@example.com"] }'), {}, 'test.yaml');
    expect(escalated.operations[0]?.approval.email).toEqual({});
  });

  it('refuses a malformed address, naming the field and the forms', () => {
    try {
      parseConfig(operation('["email:alice"]'), {}, 'test.yaml');
      expect.unreachable('a malformed address was accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).issues[0]).toMatch(/^operations\[0\]\.approval\.approvers\[0\]: expected .*email:<address>/);
    }
  });
});
