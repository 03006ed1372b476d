import { createRequire } from 'node:module';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject } from 'ajv/dist/2020.js';
import standaloneCode from 'ajv/dist/standalone/index.js';
import ajvFormats from 'ajv-formats';
import { formatFieldPath } from './errors.js';
import type { JSONSchema } from './summary-template.js';

export interface ParamError {
  /** JSON Pointer into the params, `""` for the root */
  path: string;
  message: string;
}

export type ValidateParams = (params: unknown) => ParamError[];

/** A params schema that cannot be used; `path` points inside the schema. */
export class ParamsSchemaError extends Error {
  override readonly name = 'ParamsSchemaError';
  constructor(
    readonly path: readonly PropertyKey[],
    message: string,
  ) {
    super(message);
  }
}

const DRAFT_2020 = 'https://json-schema.org/draft/2020-12/schema';

// Where JSON Schema keeps subschemas: one schema, a list of schemas, or a map of them.
const SINGLE = ['items', 'additionalProperties', 'contains', 'not', 'if', 'then', 'else'];
const LIST = ['prefixItems', 'allOf', 'anyOf', 'oneOf'];
const MAP = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const COMBINATORS = new Set(['allOf', 'anyOf', 'oneOf', 'if', 'then', 'else', 'dependentSchemas']);

function isSchemaObject(value: unknown): value is JSONSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describesObject(schema: JSONSchema): boolean {
  const type = schema['type'];
  return type === 'object' || (Array.isArray(type) && type.includes('object')) || isSchemaObject(schema['properties']);
}

function childSchemas(schema: JSONSchema): Array<{ keyword: string; path: PropertyKey[]; child: JSONSchema }> {
  const children: Array<{ keyword: string; path: PropertyKey[]; child: JSONSchema }> = [];
  for (const [keyword, value] of Object.entries(schema)) {
    if (SINGLE.includes(keyword) && isSchemaObject(value)) children.push({ keyword, path: [keyword], child: value });
    else if (LIST.includes(keyword) && Array.isArray(value)) {
      value.forEach((child: unknown, i) => isSchemaObject(child) && children.push({ keyword, path: [keyword, i], child }));
    } else if (MAP.includes(keyword) && isSchemaObject(value)) {
      for (const [name, child] of Object.entries(value)) if (isSchemaObject(child)) children.push({ keyword, path: [keyword, name], child });
    }
  }
  return children;
}

/**
 * Returns a copy of the schema in which every object schema that does not decide about
 * unknown properties gets `additionalProperties: false`: an agent must not be able to slip
 * a field past the summary the human reads. `additionalProperties: false` (rather than
 * `unevaluatedProperties`) because it is what agent tool-calling stacks understand. When
 * an object's properties are spread over allOf/anyOf/… branches, forcing it would reject
 * valid params, so the author has to decide explicitly.
 */
export function closeParamsSchema(schema: JSONSchema): JSONSchema {
  const copy = structuredClone(schema);
  close(copy, [], true);
  return copy;
}

function close(schema: JSONSchema, path: PropertyKey[], standalone: boolean): void {
  const isObject = describesObject(schema);
  const children = childSchemas(schema);
  if (isObject && standalone && !('additionalProperties' in schema) && !('unevaluatedProperties' in schema)) {
    const spread = children.find(({ keyword, child }) => COMBINATORS.has(keyword) && ('properties' in child || 'patternProperties' in child));
    if (spread !== undefined) {
      throw new ParamsSchemaError(path, `properties are declared inside ${spread.keyword}: set additionalProperties (or unevaluatedProperties) explicitly`);
    }
    schema['additionalProperties'] = false;
  }
  for (const { keyword, path: childPath, child } of children) {
    // A branch of an object schema only adds constraints to that same object, so it is not
    // closed on its own; a branch of a non-object schema (`anyOf: [{type: object}, {type: string}]`) is.
    close(child, [...path, ...childPath], !(isObject && COMBINATORS.has(keyword)));
  }
}

// Keywords that only apply to objects: a schema without `type` that uses one describes (also) objects.
const OBJECT_KEYWORDS = [
  'properties',
  'patternProperties',
  'additionalProperties',
  'unevaluatedProperties',
  'required',
  'propertyNames',
  'minProperties',
  'maxProperties',
  'dependentRequired',
  'dependentSchemas',
];
// Subschemas that only decide (a condition, a negation, a name check): they never admit a value.
const DECIDING = new Set(['not', 'if', 'propertyNames']);

type SealRole = 'standalone' | 'branch' | 'deciding';

/** Whether an object schema's properties are (also) declared in its allOf/anyOf/…/dependentSchemas branches. */
function declaresInBranches(schema: JSONSchema): boolean {
  return childSchemas(schema).some(
    ({ keyword, child }) => COMBINATORS.has(keyword) && keyword !== 'if' && (isSchemaObject(child['properties']) || declaresInBranches(child)),
  );
}

/**
 * Returns a copy of an MCP upstream's `inputSchema` in which every object, at any depth, admits only
 * the properties it names: the upstream's own `additionalProperties: true | {schema}`,
 * `patternProperties` and `unevaluatedProperties: true | {schema}` are dropped, and each object is
 * closed (`additionalProperties: false`, or `unevaluatedProperties: false` where its properties are
 * spread over allOf/anyOf/… branches). Unlike `closeParamsSchema`, it never leaves an upstream's
 * choice standing: an upstream is another party, and the summary the approver reads names the
 * declared arguments only. A schema without `type` that uses object keywords becomes `type: object`
 * (only ever stricter). Subschemas that only decide (`not`, `if`, `propertyNames`) lose what could
 * admit names (as annotations, `if: {additionalProperties: true}` would count every property as
 * evaluated) but are not closed, since closing a condition changes what it means.
 */
export function sealParamsSchema(schema: JSONSchema): JSONSchema {
  const copy = structuredClone(schema);
  seal(copy, 'standalone');
  return copy;
}

function seal(schema: JSONSchema, role: SealRole): void {
  const typeless = schema['type'] === undefined;
  const objectish = describesObject(schema) || (typeless && OBJECT_KEYWORDS.some((keyword) => keyword in schema));
  if (role !== 'deciding' && typeless && objectish) schema['type'] = 'object';
  delete schema['patternProperties'];
  for (const keyword of ['additionalProperties', 'unevaluatedProperties']) if (schema[keyword] !== false) delete schema[keyword];
  if (role === 'standalone' && objectish && schema['additionalProperties'] !== false && schema['unevaluatedProperties'] !== false) {
    if (declaresInBranches(schema)) schema['unevaluatedProperties'] = false;
    else schema['additionalProperties'] = false;
  }
  for (const { keyword, child } of childSchemas(schema)) {
    const childRole: SealRole = role === 'deciding' || DECIDING.has(keyword) ? 'deciding' : objectish && COMBINATORS.has(keyword) ? 'branch' : 'standalone';
    seal(child, childRole);
  }
}

/**
 * A copy of the schema with every `title` and `description` string, at any depth, passed through
 * `rewrite`: the words of an upstream's schema reach agents too.
 */
export function rewriteSchemaAnnotations(schema: JSONSchema, rewrite: (text: string) => string): JSONSchema {
  const copy = structuredClone(schema);
  const pending: JSONSchema[] = [copy];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    for (const keyword of ['title', 'description']) {
      const text = next[keyword];
      if (typeof text === 'string') next[keyword] = rewrite(text);
    }
    pending.push(...childSchemas(next).map(({ child }) => child));
  }
  return copy;
}

function describeError(error: ErrorObject): ParamError {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties':
      return { path: `${error.instancePath}/${escapePointer(String(params['additionalProperty']))}`, message: 'unknown property' };
    case 'unevaluatedProperties':
      return { path: `${error.instancePath}/${escapePointer(String(params['unevaluatedProperty']))}`, message: 'unknown property' };
    case 'required':
      return { path: `${error.instancePath}/${escapePointer(String(params['missingProperty']))}`, message: 'is required' };
    case 'enum': {
      const allowed = Array.isArray(params['allowedValues']) ? params['allowedValues'] : [];
      return { path: error.instancePath, message: `must be one of: ${allowed.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ')}` };
    }
    case 'const':
      return { path: error.instancePath, message: `must be ${JSON.stringify(params['allowedValue'])}` };
    default:
      return { path: error.instancePath, message: error.message ?? `fails ${error.keyword}` };
  }
}

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * Every Ajv instance compiles the draft 2020-12 meta-schemas the first time it checks a schema
 * against them: about 20–30 ms each, against about 1 ms for compiling a params schema itself. So the
 * check against the meta-schemas is made once, and each schema is then compiled (still in strict
 * mode, which is what catches keyword typos) on an instance of its own that skips it.
 *
 * Even once, compiling the meta-schemas was about 45 ms of every start. The build writes the same
 * check as code beside the compiled modules (`metaSchemaCheckCode`, run by scripts/build.js), and a
 * start loads that instead; from the TypeScript sources there is no such file, and the check is
 * compiled here as before. Both come from the one Ajv set-up below, so they accept and refuse alike.
 */
type MetaSchemaCheck = ((schema: unknown) => boolean) & { errors?: ErrorObject[] | null };

const META_SCHEMA_CHECK_FILE = 'json-schema-2020-12-check.cjs';

function metaSchemaAjv(options: { code?: { source: boolean } } = {}): Ajv2020 {
  return new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true, ...options });
}

/** The check against the draft 2020-12 meta-schemas as a CommonJS module (Ajv's standalone code), for the build to write as META_SCHEMA_CHECK_FILE. */
export function metaSchemaCheckCode(): { file: string; code: string } {
  const ajv = metaSchemaAjv({ code: { source: true } });
  return { file: META_SCHEMA_CHECK_FILE, code: standaloneCode.default(ajv, compiledMetaSchemaCheck(ajv)) };
}

function compiledMetaSchemaCheck(ajv: Ajv2020) {
  const check = ajv.getSchema(DRAFT_2020);
  if (!check) throw new Error(`Ajv has no meta-schema ${DRAFT_2020}`);
  return check;
}

function loadMetaSchemaCheck(): MetaSchemaCheck {
  try {
    return createRequire(import.meta.url)(`./${META_SCHEMA_CHECK_FILE}`) as MetaSchemaCheck;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw error;
  }
  return compiledMetaSchemaCheck(metaSchemaAjv());
}

let metaSchemaCheck: MetaSchemaCheck | undefined;

function newAjv(): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true, validateSchema: false });
  ajvFormats.default(ajv);
  return ajv;
}

/** One Ajv instance per schema so that `$id`s of different schemas cannot collide. */
function compileChecked(schema: JSONSchema) {
  const ajv = newAjv();
  // What Ajv's own compile would have thrown, worded by Ajv.
  metaSchemaCheck ??= loadMetaSchemaCheck();
  if (!metaSchemaCheck(schema)) throw new Error(`schema is invalid: ${ajv.errorsText(metaSchemaCheck.errors)}`);
  return ajv.compile(schema);
}

/**
 * Compiles a (closed) params schema. Strict mode turns keyword typos (`requird`) and
 * required-but-undeclared properties into errors at start.
 */
export function compileParamsSchema(schema: JSONSchema): ValidateParams {
  const declared = schema['$schema'];
  if (declared !== undefined && declared !== DRAFT_2020 && declared !== `${DRAFT_2020}#`) {
    throw new ParamsSchemaError(['$schema'], `only JSON Schema draft 2020-12 is supported: remove $schema or set it to ${DRAFT_2020}`);
  }
  if (schema['type'] !== 'object') {
    throw new ParamsSchemaError(['type'], 'expected "object": params are always a JSON object');
  }
  let validate: ReturnType<typeof compileChecked>;
  try {
    validate = compileChecked(schema);
  } catch (error) {
    throw new ParamsSchemaError([], error instanceof Error ? error.message : String(error));
  }
  return (params) => (validate(params) ? [] : (validate.errors ?? []).map(describeError));
}

/**
 * For params accepted under an upstream's own (open) schema: the JSON Pointer of every property the
 * sealed schema would have refused as undeclared, at any depth, so the summary can name each one.
 */
export function compileUndeclaredFinder(sealedSchema: JSONSchema): (params: unknown) => string[] {
  const validate = compileChecked(sealedSchema);
  return (params) => {
    if (validate(params)) return [];
    const paths = (validate.errors ?? [])
      .filter((error) => error.keyword === 'additionalProperties' || error.keyword === 'unevaluatedProperties')
      .map((error) => describeError(error).path);
    return [...new Set(paths)];
  };
}

export function describeSchemaPath(base: string, path: readonly PropertyKey[]): string {
  return path.length === 0 ? base : `${base}.${formatFieldPath(path)}`;
}
