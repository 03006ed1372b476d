import { describe, expect, it } from 'vitest';
import { parseBusinesses } from '../../src/agp/businesses.js';
import { parseConfig } from '../../src/config/config-file.js';
import { ConfigError } from '../../src/config/errors.js';

const operationsYaml = `
operations:
  - name: agp_order
    description: AGP orders
    params:
      type: object
      required: [businessId, request]
      properties:
        businessId: { type: string }
        request: { type: object, additionalProperties: true }
    summary: "{{ agent }} orders at {{ params.businessId }}"
    approval: { approvers: [web:alice] }
    commit: agent
    executor: { type: agp }
  - name: clicky
    description: runs at the click
    params:
      type: object
      properties:
        businessId: { type: string }
        request: { type: object, additionalProperties: true }
    summary: "{{ agent }} clicks"
    approval: { approvers: [web:alice] }
    commit: on_approve
    executor: { type: agp }
`;

const operations = parseConfig(operationsYaml, {}, 'ops.yaml').operations;

function issuesOf(businesses: Record<string, unknown>): readonly string[] {
  try {
    parseBusinesses(businesses, operations, 'test.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('businesses config', () => {
  it('always has the built-in echo business', () => {
    const directory = parseBusinesses({}, operations);
    expect(directory.get('echo')).toMatchObject({ adapterType: 'echo', name: 'Echo Labs', approval: null });
  });

  it('parses an http business whose credentials go to its own origin only, by default', () => {
    const directory = parseBusinesses(
      {
        'joes-pizza': {
          adapter: 'http',
          url: 'https://api.joespizza.example/agp',
          timeout: '5s',
          credentials: { headers: { Authorization: 'Bearer secret-value' } },
          approval: { operation: 'agp_order' },
        },
      },
      operations,
    );
    expect(directory.get('joes-pizza')).toMatchObject({
      adapterType: 'http',
      timeoutMs: 5_000,
      credentials: { headers: { Authorization: 'Bearer secret-value' }, origins: ['https://api.joespizza.example'] },
      approval: { operation: 'agp_order' },
    });
  });

  it('names every bad field, and never quotes a value', () => {
    const issues = issuesOf({
      a: { adapter: 'ftp' },
      b: { adapter: 'http' },
      c: { adapter: 'http', url: 'ftp://x', credentials: { headers: { 'bad header': 'super-secret-value' } } },
      d: { adapter: 'echo', aproval: {} },
      'bad id!': { adapter: 'echo' },
    });
    expect(issues).toEqual(
      expect.arrayContaining([
        'businesses.a.adapter: expected adapter: echo or adapter: http',
        'businesses.b.url: required',
        'businesses.c.url: expected an http:// or https:// URL',
        'businesses.d.aproval: unknown key',
        expect.stringMatching(/^businesses\["bad id!"\]: a business id is/),
      ]),
    );
    expect(issues.some((issue) => issue.startsWith('businesses.c.credentials.headers'))).toBe(true);
    expect(issues.join('\n')).not.toContain('super-secret-value');
  });

  it('refuses an approval operation that is missing, runs at the click, or does not take { businessId, request }', () => {
    expect(issuesOf({ x: { adapter: 'echo', approval: { operation: 'nope' } } })).toEqual([
      'businesses.x.approval.operation: no operation named "nope" under operations',
    ]);
    expect(issuesOf({ x: { adapter: 'echo', approval: { operation: 'clicky' } } })).toEqual([expect.stringContaining('must have commit: agent')]);
    const narrowYaml = `
operations:
  - name: narrow
    description: takes a shop, not a business
    params: { type: object, properties: { shop: { type: string } } }
    summary: "{{ agent }} buys"
    approval: { approvers: [web:alice] }
    commit: agent
    executor: { type: agp }
`;
    const narrow = parseConfig(narrowYaml, {}, 'narrow.yaml').operations;
    expect(() => parseBusinesses({ x: { adapter: 'echo', approval: { operation: 'narrow' } } }, narrow)).toThrow(/must declare businessId and request/);
    const plain = parseConfig(operationsYaml.replaceAll('type: agp', 'type: echo'), {}, 'ops.yaml').operations;
    expect(() => parseBusinesses({ x: { adapter: 'echo', approval: { operation: 'agp_order' } } }, plain)).toThrow(/must have executor: \{ type: agp \}/);
  });

  it('takes the JSON pointers where a business reads its amount, and refuses what is not one', () => {
    const directory = parseBusinesses(
      { shop: { adapter: 'http', url: 'https://shop.example/agp', amounts: ['/order/total_cents', '/tip~1extra'] } },
      operations,
    );
    expect(directory.get('shop')?.amounts).toEqual(['/order/total_cents', '/tip~1extra']);
    expect(parseBusinesses({}, operations).get('echo')?.amounts).toBeNull();
    expect(issuesOf({ shop: { adapter: 'http', url: 'https://shop.example/agp', amounts: ['order.total'] } })).toEqual([
      'businesses.shop.amounts[0]: expected a JSON pointer, such as /order/amount_cents',
    ]);
    expect(issuesOf({ shop: { adapter: 'echo', amounts: [] } })).toEqual(['businesses.shop.amounts: expected at least one JSON pointer']);
  });
});
