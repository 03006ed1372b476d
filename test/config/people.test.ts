import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { ConfigError } from '../../src/config/errors.js';

const operation = (approvers: string, quorum = 1) => `
operations:
  - name: delete_workspace
    description: Delete a workspace
    params: { type: object, properties: { workspace: { type: string } } }
    summary: "{{agent}} wants to delete {{params.workspace}}."
    approval:
      approvers: ${approvers}
      quorum: ${quorum}
    executor: { type: echo }
`;

function issues(yaml: string): readonly string[] {
  try {
    parseConfig(yaml, {}, 'test.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected parseConfig to throw');
}

describe('people in the config file', () => {
  it('parses people with their identities', () => {
    const config = parseConfig(
      `people:\n  - { name: alice, identities: [web:alice, slack:U0ALICE] }\n  - name: bob\n    identities: ["discord:user:223456789012345678"]\n${operation('[web:alice, slack:U0ALICE, web:bob]', 2)}`,
      {},
      'test.yaml',
    );
    expect(config.people).toEqual([
      { name: 'alice', identities: ['web:alice', 'slack:U0ALICE'] },
      { name: 'bob', identities: ['discord:user:223456789012345678'] },
    ]);
  });

  it('names the field of a bad person: a group as a person, an unknown form, no identities, a bad name', () => {
    expect(
      issues(
        `people:\n  - { name: alice, identities: [web:alice, slack:group:S0OPS, "discord:user:1234567890123456"] }\n  - { name: "bad name", identities: [] }\n${operation('[web:alice]')}`,
      ),
    ).toEqual([
      'people[0].identities[1]: expected one person (slack:U…, slack:W…, discord:user:<id>, teams:<object id>, email:<address>, web:<name> or oidc:<claim>), not a group or role',
      'people[0].identities[2]: expected slack:U…, slack:W…, discord:user:<id>, teams:<object id>, email:<address>, web:<name> or oidc:<claim>',
      'people[1].name: expected 1-64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit',
      'people[1].identities: expected at least one identity',
    ]);
  });

  it('an identity belongs to one person, and a name to one entry', () => {
    expect(
      issues(`people:\n  - { name: alice, identities: [web:alice] }\n  - { name: alice, identities: [slack:U0ALICE, web:alice] }\n${operation('[web:alice]')}`),
    ).toEqual(['people[1].name: duplicate person name (also people[0])', 'people[1].identities[1]: web:alice is already listed (people[0].identities[0])']);
  });

  it('bounds the quorum by the approvers counted as people', () => {
    const twoIdentitiesOnePerson = `people:\n  - { name: alice, identities: [web:alice, slack:U0ALICE] }\n${operation('[web:alice, slack:U0ALICE]', 2)}`;
    expect(issues(twoIdentitiesOnePerson)).toEqual(['operations[0].approval.quorum: cannot exceed the number of individual approvers, counted as people (1)']);
    // A group may hold anyone, so it lifts the bound.
    expect(() =>
      parseConfig(
        `people:\n  - { name: alice, identities: [web:alice, slack:U0ALICE] }\n${operation('[web:alice, slack:U0ALICE, slack:group:S0OPS]', 2)}`,
        {},
        't',
      ),
    ).not.toThrow();
  });

  it('refuses an approver identity of 16 digits at start, naming the field', () => {
    expect(issues(operation('["discord:user:1234567890123456"]'))).toEqual([
      'operations[0].approval.approvers[0]: expected slack:U…, slack:W…, slack:group:S…, discord:user:<id>, discord:role:<id>, teams:<object id>, email:<address>, web:<name>, oidc:<claim> or oidc:group:<name>',
    ]);
  });
});
