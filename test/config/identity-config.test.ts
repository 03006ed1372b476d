import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/config-file.js';
import { ConfigError } from '../../src/config/errors.js';

const refund = (approval: string) => `
operations:
  - name: refund
    description: Refund a customer
    params: { type: object, required: [amount_cents], properties: { amount_cents: { type: integer } } }
    summary: "{{agent}} refunds {{params.amount_cents}} cents."
    approval:
${approval}
    executor: { type: echo }
`;

function issues(yaml: string, env: NodeJS.ProcessEnv = {}): readonly string[] {
  try {
    parseConfig(yaml, env, 'test.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected parseConfig to throw');
}

describe('console.oidc in the config file', () => {
  const oidc = (extra = '') => `console:\n  oidc:\n    issuer: https://login.example.com/tenant/v2.0\n    clientId: twokey\n${extra}`;

  it('reads the issuer, with the client secret from the environment variable it names', () => {
    const config = parseConfig(
      `${oidc('    groupsClaim: groups\n')}${refund('      approvers: [oidc:group:finance, oidc:alice@example.com]')}`,
      { TWOKEY_OIDC_CLIENT_SECRET: 's3cret' },
      't.yaml',
    );
    expect(config.console.oidc).toEqual({
      issuer: 'https://login.example.com/tenant/v2.0',
      name: 'login.example.com',
      clientId: 'twokey',
      clientSecret: 's3cret',
      clientSecretEnv: 'TWOKEY_OIDC_CLIENT_SECRET',
      scopes: ['openid', 'email', 'profile'],
      identityClaim: 'sub',
      groupsClaim: 'groups',
    });
    expect(parseConfig(refund('      approvers: [web:a]'), {}, 't.yaml').console).toEqual({});
  });

  it('names what is wrong: no secret in the environment, an http issuer, scopes without openid', () => {
    expect(issues(`${oidc('    clientSecretEnv: OKTA_SECRET\n')}${refund('      approvers: [web:a]')}`)).toEqual([
      'console.oidc.clientSecretEnv: environment variable OKTA_SECRET is not set (it holds the client secret)',
    ]);
    const bad = `console:\n  oidc:\n    issuer: http://login.example.com\n    clientId: twokey\n    scopes: [email]\n${refund('      approvers: [web:a]')}`;
    expect(issues(bad, { TWOKEY_OIDC_CLIENT_SECRET: 'x' })).toEqual([
      'console.oidc.issuer: expected an https:// issuer URL (http:// only for localhost)',
      'console.oidc.scopes: scopes must include openid',
    ]);
  });

  it('an issuer identity is one person in people:, a group is not', () => {
    const config = parseConfig(
      `people:\n  - { name: alice, identities: [web:alice, oidc:alice@example.com] }\n${refund('      approvers: [web:alice]')}`,
      {},
      't.yaml',
    );
    expect(config.people?.[0]?.identities).toContain('oidc:alice@example.com');
    expect(issues(`people:\n  - { name: alice, identities: [oidc:group:finance] }\n${refund('      approvers: [web:alice]')}`)).toEqual([
      'people[0].identities[0]: expected one person (slack:U…, slack:W…, discord:user:<id>, teams:<object id>, email:<address>, web:<name> or oidc:<claim>), not a group or role',
    ]);
  });
});

describe('approval.approverRule in the config file', () => {
  it('compiles a rule with its reason', () => {
    const config = parseConfig(
      refund(
        '      approvers: [web:a, web:b]\n      approverRule: { when: \'params.amount_cents <= 100000 || "finance-leads" in approver.groups\', reason: big refunds need finance }',
      ),
      {},
      't.yaml',
    );
    const rule = config.operations[0]?.approval.approverRule;
    expect(rule?.reason).toBe('big refunds need finance');
    const input = { approver: { identity: 'web:a', person: 'web:a', groups: [] }, agent: 'x', owners: [], operation: 'refund' };
    expect(rule?.evaluate({ ...input, params: { amount_cents: 200_000 } })).toEqual({ kind: 'no_match' });
    expect(rule?.evaluate({ ...input, params: { amount_cents: 200 } })).toEqual({ kind: 'match' });
  });

  it('names a bad rule at start: syntax, unknown names and fields, undeclared params, a non-boolean', () => {
    const rule = (when: string) => issues(refund(`      approvers: [web:a]\n      approverRule: { when: ${JSON.stringify(when)} }`));
    expect(rule('params.amount_cents <=')[0]).toMatch(/^operations\[0\]\.approval\.approverRule\.when: not a CEL expression/);
    expect(rule('user == "x"')).toEqual([
      'operations[0].approval.approverRule.when: unknown name "user" (a condition reads approver, agent, owners, operation and params)',
    ]);
    expect(rule('approver.team == "x"')).toEqual(['operations[0].approval.approverRule.when: approver.team is not known (it has identity, person, groups)']);
    expect(rule('params.amount > 1')).toEqual(['operations[0].approval.approverRule.when: params.amount is not a param of this operation']);
    expect(rule('params.amount_cents + 1')[0]).toMatch(/^operations\[0\]\.approval\.approverRule\.when: /);
    expect(rule('count_last("1h") < 3')).toContain('operations[0].approval.approverRule.when: count_last belongs to policy rules, not to an approver rule');
  });
});
