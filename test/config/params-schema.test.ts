import { createRequire } from 'node:module';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { compileParamsSchema, metaSchemaCheckCode, type ParamsSchemaError } from '../../src/config/params-schema.js';

/** The module the build writes (metaSchemaCheckCode), loaded as CommonJS the way a built start loads it. */
function builtMetaSchemaCheck(): ((schema: unknown) => boolean) & { errors?: unknown[] | null } {
  const module = { exports: {} as unknown };
  new Function('module', 'exports', 'require', metaSchemaCheckCode().code)(module, module.exports, createRequire(import.meta.url));
  return module.exports as ReturnType<typeof builtMetaSchemaCheck>;
}

/** Keyword values of the wrong type: strict mode does not see them, only the meta-schemas do. */
const INVALID = [
  { type: 'object', properties: { org: { type: 'strin', minLength: 'one' } }, required: 'org' },
  { type: 'object', additionalProperties: 3, properties: { plan: { enum: 'pro' } } },
  { type: 'object', $defs: { money: { $ref: 5 } }, allOf: {} },
  { type: 'object', properties: { code: { pattern: 5, items: [1] } }, prefixItems: {} },
  { type: 'object', $anchor: '1st', dependentRequired: { org: [1] }, if: 1 },
];

describe('the check against the draft 2020-12 meta-schemas', () => {
  it('refuses, as the build writes it, what the check compiled at start refuses, in the same words', () => {
    const built = builtMetaSchemaCheck();
    const words = new Ajv2020();
    for (const schema of INVALID) {
      let compiled: ParamsSchemaError | undefined;
      try {
        compileParamsSchema(schema);
      } catch (error) {
        compiled = error as ParamsSchemaError;
      }
      expect(compiled?.message).toMatch(/^schema is invalid: data/);
      expect(built(schema)).toBe(false);
      expect(`schema is invalid: ${words.errorsText(built.errors as never)}`).toBe(compiled?.message);
    }
  });

  it('accepts, as the build writes it, a schema the check compiled at start accepts', () => {
    const schema = {
      type: 'object',
      required: ['org'],
      properties: { org: { type: 'string', minLength: 1 }, tags: { type: 'array', items: { type: 'string' } } },
    };
    expect(compileParamsSchema(schema)({ org: 'acme', tags: [] })).toEqual([]);
    expect(builtMetaSchemaCheck()(schema)).toBe(true);
  });
});
