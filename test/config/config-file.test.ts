import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_CONFIG_PATH, loadConfigFile, parseConfig, resolveConfigPath } from '../../src/config/config-file.js';
import type { OperationDefinition, TwokeyConfig } from '../../src/config/config-file.js';
import { ConfigError } from '../../src/config/errors.js';

const OPERATION = `
  - name: upgrade_plan
    description: Change an organisation's billing plan
    confirmationType: payment
    params:
      type: object
      required: [org, plan]
      properties:
        org:  { type: string }
        plan: { type: string, enum: [pro, scale, enterprise] }
        amount_cents: { type: integer, minimum: 0 }
    summary: "{{agent}} is requesting to upgrade {{params.org}} to the {{params.plan}} plan."
    cost: "{{ params.amount_cents | usd }}"
    approval:
      approvers: [slack:U0ALICE, "discord:role:123456789012345678"]
    executor: { type: echo }
`;

function operation(yaml: string, index = 0): OperationDefinition {
  const op = parseConfig(yaml, {}, 'test.yaml').operations[index];
  if (op === undefined) throw new Error(`no operation ${index}`);
  return op;
}

function configIssues(yaml: string, env: NodeJS.ProcessEnv = {}): readonly string[] {
  try {
    parseConfig(yaml, env, 'test.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected parseConfig to throw');
}

/** Two valid operations followed by `third`, to check paths point past index 0. */
function threeOperations(third: string): string {
  return `operations:${OPERATION}${OPERATION.replace('upgrade_plan', 'second_op')}${third}`;
}

describe('parseConfig', () => {
  it('parses the contract example with its defaults', () => {
    const op = operation(`operations:${OPERATION}`);
    expect(op).toMatchObject({
      name: 'upgrade_plan',
      confirmationType: 'payment',
      expiresInMs: 300_000,
      approval: { approvers: ['slack:U0ALICE', 'discord:role:123456789012345678'], quorum: 1 },
      commit: 'on_approve',
      executor: { type: 'echo' },
    });
    expect(op.renderSummary({ agent: 'billing-bot', operation: 'upgrade_plan', params: { org: 'acme', plan: 'scale' } })).toBe(
      'billing-bot is requesting to upgrade acme to the scale plan.',
    );
    expect(op.renderCost?.({ agent: 'billing-bot', operation: 'upgrade_plan', params: { amount_cents: 49_900 } })).toBe('$499.00');
  });

  it('accepts JSON', () => {
    const json = JSON.stringify({
      operations: [
        {
          name: 'restart',
          description: 'Restart the service',
          summary: '{{ agent }} restarts',
          approval: { approvers: ['web:operator'] },
          executor: { type: 'echo' },
        },
      ],
    });
    const config = parseConfig(json, {}, 'config.json');
    expect(config.operations.map((op) => op.name)).toEqual(['restart']);
    expect(config.operations[0]?.confirmationType).toBe('approval');
    expect(config.operations[0]?.validateParams({ anything: 1 })).toEqual([{ path: '/anything', message: 'unknown property' }]);
  });

  it('points at the exact field', () => {
    const issues = configIssues(threeOperations(OPERATION.replace('upgrade_plan', 'third_op').replace('approvers:', 'quorum: 0\n      approvers:')));
    expect(issues).toEqual(['operations[2].approval.quorum: expected a positive integer']);
  });

  it('lists every problem, one per line, with its path', () => {
    const yaml = `operations:
  - name: Upgrade-Plan
    description: 42
    confirmationType: refund
    summary: "{{ agent }}"
    expiresIn: 30d
    approval:
      approvers: [slack:alice, web:operator]
      quorum: 1.5
      discord: { channel: 223456789012345678 }
    commit: later
    executor: { type: http, url: "ftp://example.com", secret: short, timeout: 5 }
`;
    const error = (() => {
      try {
        parseConfig(yaml, {}, 'test.yaml');
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ConfigError);
    const issues = (error as ConfigError).issues;
    expect(issues).toEqual([
      'operations[0].name: expected lower_snake_case starting with a letter, at most 64 characters',
      'operations[0].description: expected a string',
      'operations[0].confirmationType: expected one of: payment, approval, verification',
      'operations[0].expiresIn: expected a duration between 10s and 7d, such as 5m',
      'operations[0].approval.approvers[0]: expected slack:U…, slack:W…, slack:group:S…, discord:user:<id>, discord:role:<id>, teams:<object id>, email:<address>, web:<name>, oidc:<claim> or oidc:group:<name>',
      'operations[0].approval.quorum: expected a positive integer',
      'operations[0].approval.discord.channel: expected a string: quote Discord ids, e.g. "223456789012345678"',
      'operations[0].commit: expected one of: on_approve, agent',
      'operations[0].executor.url: expected an http:// or https:// URL',
      'operations[0].executor.secret: expected at least 16 characters',
      'operations[0].executor.timeout: expected a duration between 1s and 5m, such as 10s',
    ]);
    expect((error as ConfigError).message.split('\n')).toEqual(['Invalid config file test.yaml:', ...issues.map((issue) => `  ${issue}`)]);
  });

  it('rejects unknown keys anywhere', () => {
    const yaml = `operations:${OPERATION.replace('approval:', 'aproval: {}\n    approval:').replace('executor: { type: echo }', 'executor: { type: echo, url: "http://x" }')}
opertions: []
`;
    expect(configIssues(yaml)).toEqual(['operations[0].executor.url: unknown key', 'operations[0].aproval: unknown key', 'opertions: unknown key']);
  });

  it('reports missing required fields', () => {
    expect(configIssues('operations:\n  - name: x\n')).toEqual([
      'operations[0].description: required',
      'operations[0].summary: required',
      'operations[0].approval: required',
      'operations[0].executor: required',
    ]);
  });

  it('rejects an unknown executor type by naming the allowed ones', () => {
    expect(configIssues(`operations:${OPERATION.replace('type: echo', 'type: shell')}`)).toEqual([
      'operations[0].executor.type: expected one of: echo, agp, http, mcp',
    ]);
  });

  it('rejects duplicate operation names', () => {
    expect(configIssues(`operations:${OPERATION}${OPERATION}`)).toEqual(['operations[1].name: duplicate operation name (also operations[0])']);
  });

  it('bounds the quorum by the number of individual approvers, not by groups', () => {
    const individuals = OPERATION.replace('[slack:U0ALICE, "discord:role:123456789012345678"]', '[slack:U0ALICE, web:bob]\n      quorum: 3');
    expect(configIssues(`operations:${individuals}`)).toEqual(['operations[0].approval.quorum: cannot exceed the number of individual approvers (2)']);
    const withGroup = OPERATION.replace('approvers: [', 'quorum: 3\n      approvers: [slack:group:S0ADMINS, ');
    expect(operation(`operations:${withGroup}`).approval.quorum).toBe(3);
  });

  it('rejects duplicate approvers', () => {
    expect(configIssues(`operations:${OPERATION.replace('[slack:U0ALICE,', '[slack:U0ALICE, slack:U0ALICE,')}`)).toEqual([
      'operations[0].approval.approvers[1]: duplicate approver',
    ]);
  });

  it('accepts every approver identity form', () => {
    const approvers = [
      'slack:U0ALICE',
      'slack:W012ABC',
      'slack:group:S0ADMINS',
      'discord:user:12345678901234567',
      'discord:role:12345678901234567890',
      'web:operator',
    ];
    const op = operation(`operations:${OPERATION.replace('[slack:U0ALICE, "discord:role:123456789012345678"]', JSON.stringify(approvers))}`);
    expect(op.approval.approvers).toEqual(approvers);
  });

  it('builds an http executor with its timeout in milliseconds', () => {
    const yaml = `operations:${OPERATION.replace(
      'executor: { type: echo }',
      'executor:\n      type: http\n      url: https://billing.internal/upgrade\n      secret: ${UPGRADE_WEBHOOK_SECRET}\n      timeout: 30s',
    )}`;
    const op = parseConfig(yaml, { UPGRADE_WEBHOOK_SECRET: 'whsec_0123456789abcdef' }, 'test.yaml').operations[0];
    expect(op?.executor).toEqual({ type: 'http', url: 'https://billing.internal/upgrade', secret: 'whsec_0123456789abcdef', timeoutMs: 30_000 });
  });

  describe('${VAR} substitution', () => {
    it('replaces references inside any string', () => {
      const yaml = `operations:${OPERATION.replace('approvers: [', 'slack: { channel: "${APPROVAL_CHANNEL}" }\n      approvers: ["web:${OPERATOR}-on-call", ')}`;
      const op = parseConfig(yaml, { APPROVAL_CHANNEL: 'C0APPROVALS', OPERATOR: 'ops' }, 'test.yaml').operations[0];
      expect(op?.approval.slack).toEqual({ channel: 'C0APPROVALS' });
      expect(op?.approval.approvers[0]).toBe('web:ops-on-call');
    });

    it('names the field and the variable when the variable is unset or empty', () => {
      const yaml = `operations:${OPERATION.replace('executor: { type: echo }', 'executor:\n      type: http\n      url: http://127.0.0.1:9000/upgrade\n      secret: ${UPGRADE_WEBHOOK_SECRET}')}`;
      const expected = ['operations[0].executor.secret: environment variable UPGRADE_WEBHOOK_SECRET is not set'];
      expect(configIssues(yaml, {})).toEqual(expected);
      expect(configIssues(yaml, { UPGRADE_WEBHOOK_SECRET: '' })).toEqual(expected);
    });

    it('does not echo a substituted secret in errors', () => {
      const yaml = `operations:${OPERATION.replace('executor: { type: echo }', 'executor:\n      type: http\n      url: http://127.0.0.1:9000/upgrade\n      secret: ${SHORT_SECRET}')}`;
      const issues = configIssues(yaml, { SHORT_SECRET: 'tiny-s3cr3t' });
      expect(issues).toEqual(['operations[0].executor.secret: expected at least 16 characters']);
      expect(issues.join('\n')).not.toContain('s3cr3t');
    });
  });

  describe('params schema', () => {
    it('rejects unknown properties and lists every error', () => {
      const op = operation(`operations:${OPERATION}`);
      expect(op.validateParams({ org: 'acme', plan: 'pro' })).toEqual([]);
      expect(op.validateParams({ plan: 'gold', amount_cents: -1.5, coupon: 'FREE' })).toEqual([
        { path: '/org', message: 'is required' },
        { path: '/coupon', message: 'unknown property' },
        { path: '/plan', message: 'must be one of: pro, scale, enterprise' },
        { path: '/amount_cents', message: 'must be integer' },
        { path: '/amount_cents', message: 'must be >= 0' },
      ]);
      expect(op.validateParams(['acme'])).toEqual([{ path: '', message: 'must be object' }]);
    });

    it('closes nested objects too, but keeps an explicit additionalProperties', () => {
      const yaml = `operations:${OPERATION.replace(
        'amount_cents: { type: integer, minimum: 0 }',
        'amount_cents: { type: integer, minimum: 0 }\n        billing: { type: object, properties: { email: { type: string, format: email } } }\n        labels: { type: object, additionalProperties: { type: string } }',
      )}`;
      const op = operation(yaml);
      expect(op.paramsSchema).toMatchObject({
        additionalProperties: false,
        properties: { billing: { additionalProperties: false }, labels: { additionalProperties: { type: 'string' } } },
      });
      expect(op.validateParams({ org: 'a', plan: 'pro', billing: { email: 'nope', fax: '1' }, labels: { team: 'x' } })).toEqual([
        { path: '/billing/fax', message: 'unknown property' },
        { path: '/billing/email', message: 'must match format "email"' },
      ]);
    });

    it('refuses schemas that do not compile, naming operations[i].params', () => {
      expect(configIssues(`operations:${OPERATION.replace('required: [org, plan]', 'requird: [org, plan]')}`)).toEqual([
        'operations[0].params: strict mode: unknown keyword: "requird"',
      ]);
      expect(configIssues(`operations:${OPERATION.replace('required: [org, plan]', 'required: [org, plan, seats]')}`)[0]).toMatch(
        /^operations\[0\]\.params: .*required property "seats" is not defined/,
      );
      expect(configIssues(`operations:${OPERATION.replace('type: object', 'type: array')}`)).toEqual([
        'operations[0].params.type: expected "object": params are always a JSON object',
      ]);
    });

    it('asks for an explicit decision when properties are spread over allOf', () => {
      const yaml = `operations:${OPERATION.replace('required: [org, plan]', 'allOf: [{ properties: { seats: { type: integer } } }]\n      required: [org, plan]')}`;
      expect(configIssues(yaml)).toEqual([
        'operations[0].params: properties are declared inside allOf: set additionalProperties (or unevaluatedProperties) explicitly',
      ]);
    });
  });

  describe('templates', () => {
    it('fails at load when the summary names an undeclared param', () => {
      expect(configIssues(`operations:${OPERATION.replace('{{params.plan}} plan', '{{params.tier}} plan')}`)).toEqual([
        'operations[0].summary: params.tier (line 1): "tier" is not declared in the params schema',
      ]);
    });

    it('fails at load when the cost template uses an unknown filter', () => {
      expect(configIssues(`operations:${OPERATION.replace('| usd', '| eur')}`)).toEqual(['operations[0].cost: undefined filter: eur, line:1, col:1']);
    });

    it('refuses include', () => {
      const issues = configIssues(`operations:${OPERATION.replace('plan."', `plan. {% include '/etc/passwd' %}"`)}`);
      expect(issues).toHaveLength(1);
      expect(issues[0]).toMatch(/^operations\[0\]\.summary: tag "include" not found/);
    });
  });

  describe('what chat shows of a result', () => {
    it('is the outcome only unless the operation has a result template or opts in to JSON', () => {
      expect(operation(`operations:${OPERATION}`).chatResult).toBe('outcome');
      expect(operation(`operations:${OPERATION}    chatResult: json\n`).chatResult).toBe('json');
    });

    it('refuses an unknown chatResult, and JSON next to a result template that already decides', () => {
      expect(configIssues(`operations:${OPERATION}    chatResult: everything\n`)).toEqual(['operations[0].chatResult: expected one of: outcome, json']);
      expect(configIssues(`operations:${OPERATION}    chatResult: json\n    result: "{{ result.id }}"\n`)).toEqual([
        'operations[0].chatResult: the result template already decides what chat shows; remove one of them',
      ]);
    });
  });

  it('reports YAML syntax errors with their line', () => {
    expect(configIssues('operations: [\n')[0]).toMatch(/^YAML: Flow sequence .* at line 2, column 1/);
    expect(configIssues('operations: []\noperations: []\n')[0]).toMatch(/^YAML: Map keys must be unique at line 2/);
  });

  it('passes businesses through untouched', () => {
    const config = parseConfig('businesses:\n  echo: { adapter: echo, nested: [1, 2] }\n', {}, 'test.yaml');
    expect(config).toEqual({ source: 'test.yaml', operations: [], businesses: { echo: { adapter: 'echo', nested: [1, 2] } }, upstreams: [], console: {} });
  });
});

describe('the shipped example', () => {
  const example: TwokeyConfig = loadConfigFile(EXAMPLE_CONFIG_PATH, {});
  const params: Record<string, Record<string, unknown>> = {
    upgrade_plan: { org: 'acme', plan: 'enterprise', amount_cents: 129_900 },
    refund: { order: 'ord_1042', amount_cents: 1250 },
    approve_tool_call: { tool: 'wipe_cache', input: { region: 'eu' }, callId: 'call_1' },
    remove_member: { org: 'acme', member: 'mallory@acme.test' },
    send_mailing: { list: 'customers', subject: 'Spring sale', recipients: 12_000 },
    delete_workspace: { workspace: 'acme-prod' },
  };

  it('declares the documented operations', () => {
    expect(example.operations.map((op) => op.name)).toEqual(Object.keys(params));
    expect(example.operations.find((op) => op.name === 'delete_workspace')?.approval.quorum).toBe(2);
    for (const op of example.operations) {
      expect(op.approval.approvers).toEqual(expect.arrayContaining(['web:operator', 'web:reviewer']));
      expect(op.executor).toEqual({ type: 'echo' });
    }
  });

  it.each(Object.entries(params))('validates and summarises %s', (name, opParams) => {
    const op = example.operations.find((candidate) => candidate.name === name);
    expect(op).toBeDefined();
    if (op === undefined) return;
    expect(op.validateParams(opParams)).toEqual([]);
    expect(op.validateParams({ ...opParams, extra: true })).toEqual([{ path: '/extra', message: 'unknown property' }]);
    const summary = op.renderSummary({ agent: 'ops-bot', operation: name, params: opParams });
    expect(summary).toMatch(/^ops-bot /);
    for (const value of Object.values(opParams)) if (typeof value === 'string') expect(summary).toContain(value);
  });

  it('renders the upgrade cost in dollars, or says it is not stated', () => {
    const upgrade = example.operations.find((op) => op.name === 'upgrade_plan');
    expect(upgrade?.renderCost?.({ agent: 'a', operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro', amount_cents: 129_900 } })).toBe('$1,299.00');
    expect(upgrade?.renderCost?.({ agent: 'a', operation: 'upgrade_plan', params: { org: 'acme', plan: 'pro' } })).toBe('not stated');
  });
});

describe('resolveConfigPath', () => {
  it('prefers TWOKEY_CONFIG, then ./twokey.config.yaml, then the shipped example', () => {
    const dir = mkdtempSync(join(tmpdir(), 'twokey-config-'));
    try {
      expect(resolveConfigPath({ TWOKEY_CONFIG: 'custom.yaml' }, dir)).toBe(join(dir, 'custom.yaml'));
      expect(resolveConfigPath({ TWOKEY_CONFIG: '' }, dir)).toBe(EXAMPLE_CONFIG_PATH);
      writeFileSync(join(dir, 'twokey.config.yaml'), 'operations: []\n');
      expect(resolveConfigPath({}, dir)).toBe(join(dir, 'twokey.config.yaml'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names TWOKEY_CONFIG when the file cannot be read', () => {
    expect(() => loadConfigFile('/nonexistent/twokey.yaml', {})).toThrow(
      'cannot read the config file /nonexistent/twokey.yaml (TWOKEY_CONFIG): no such file or directory',
    );
  });
});
