import { Liquid } from 'liquidjs';
import type { FS, FilterImplOptions, Template } from 'liquidjs';

export type JSONSchema = Record<string, unknown>;

/** Everything a summary template can read: the proposal, nothing of the server. */
export interface SummaryContext {
  agent: string;
  operation: string;
  params: Record<string, unknown>;
}

export type RenderSummary = (ctx: SummaryContext) => string;

/** A template that cannot be compiled; the config loader prefixes the field path. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

// Templates are a line or a paragraph; these bounds only stop a hostile or broken config
// (or a huge param) from stalling the proposal path.
const PARSE_LIMIT_CHARS = 20_000;
const RENDER_LIMIT_MS = 100;
const MEMORY_LIMIT = 10_000_000;
const TEMPLATE_LIMIT = 10_000;

const refusingFs: FS = {
  exists: () => Promise.resolve(false),
  existsSync: () => false,
  readFile: (file) => Promise.reject(new Error(`summary templates cannot read files (${file})`)),
  readFileSync: (file) => {
    throw new Error(`summary templates cannot read files (${file})`);
  },
  resolve: (_dir, file) => file,
  contains: () => Promise.resolve(false),
  containsSync: () => false,
};

const liquid = new Liquid({
  fs: refusingFs,
  relativeReference: false,
  strictFilters: true,
  // An absent optional param must render as '' rather than fail the proposal; names that
  // are not declared at all are rejected at compile time instead (see checkVariables).
  strictVariables: false,
  ownPropertyOnly: true,
  timezoneOffset: 0,
  parseLimit: PARSE_LIMIT_CHARS,
  renderLimit: RENDER_LIMIT_MS,
  memoryLimit: MEMORY_LIMIT,
});

// The refusing fs already blocks reads; removing the tags also turns their use into a
// compile-time error instead of a failure at propose time.
delete liquid.tags['include'];
delete liquid.tags['render'];
delete liquid.tags['layout'];

export function formatUsd(cents: unknown): string {
  if (cents === undefined || cents === null || cents === '') return '';
  const n = typeof cents === 'number' ? cents : Number(cents);
  if (!Number.isFinite(n)) return typeof cents === 'string' ? cents : '';
  const abs = Math.abs(Math.round(n));
  const dollars = Math.floor(abs / 100).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const rest = (abs % 100).toString().padStart(2, '0');
  return `${n < 0 && abs !== 0 ? '-' : ''}$${dollars}.${rest}`;
}

function toDate(value: unknown): Date | undefined {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value;
  if (typeof value === 'number') return Number.isFinite(value) ? new Date(value) : undefined;
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const date = /^\d+$/.test(value) ? new Date(Number(value)) : new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** ISO string or epoch milliseconds → `2026-11-22 14:05 UTC`. Unparseable input is shown as is. */
export function formatDate(value: unknown): string {
  if (value === undefined || value === null) return '';
  const date = toDate(value);
  if (date === undefined) return typeof value === 'string' ? value : '';
  const iso = date.toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

type FilterThis = ThisParameterType<Extract<FilterImplOptions, (...args: never[]) => unknown>>;

const builtinDate = liquid.filters['date'];
liquid.registerFilter('usd', (value: unknown) => formatUsd(value));
// Overrides liquid's date, whose default format depends on the server's locale and time zone;
// an explicit strftime format still works, in UTC.
liquid.registerFilter('date', function (this: FilterThis, value: unknown, format?: unknown) {
  const date = toDate(value);
  if (format === undefined || date === undefined || typeof builtinDate !== 'function') return formatDate(value);
  return builtinDate.call(this, date, format) as unknown;
});

function declaredProperties(schema: unknown): Record<string, unknown> | undefined {
  if (typeof schema !== 'object' || schema === null) return undefined;
  const properties = (schema as JSONSchema)['properties'];
  return typeof properties === 'object' && properties !== null ? (properties as Record<string, unknown>) : undefined;
}

/**
 * Reading an undeclared param would silently render '' forever, so every variable the
 * template reads must be `agent`, `operation`, or a `params.…` path whose segments are
 * declared as far as the schema declares nested `properties`.
 */
function checkVariables(templates: Template[], paramsSchema: JSONSchema): void {
  const problems: string[] = [];
  const { globals } = liquid.analyzeSync(templates, { partials: false });
  for (const [root, uses] of Object.entries(globals)) {
    for (const variable of uses) {
      const where = `${variable.toString()} (line ${variable.location.row})`;
      if (root === 'agent' || root === 'operation') {
        if (variable.segments.length > 1) problems.push(`${where}: ${root} is a string; use {{ ${root} }}`);
        continue;
      }
      if (root !== 'params') {
        problems.push(`${where}: unknown variable; templates can read agent, operation and params.<name>`);
        continue;
      }
      if (variable.segments.length < 2) {
        problems.push(`${where}: read a single param, such as params.<name>`);
        continue;
      }
      let properties = declaredProperties(paramsSchema);
      for (const segment of variable.segments.slice(1)) {
        if (properties === undefined) break;
        if (typeof segment !== 'string') {
          problems.push(`${where}: computed param names cannot be checked; name the param`);
          break;
        }
        if (!Object.hasOwn(properties, segment)) {
          problems.push(`${where}: "${segment}" is not declared in the params schema`);
          break;
        }
        properties = declaredProperties(properties[segment]);
      }
    }
  }
  if (problems.length > 0) throw new TemplateError(problems.join('; '));
}

/**
 * Compiles a summary (or cost) template. All errors — syntax, unknown filters or tags,
 * undeclared params — surface here, at start, never when an agent proposes.
 */
export function compileSummaryTemplate(source: string, paramsSchema: JSONSchema): RenderSummary {
  let templates: Template[];
  try {
    templates = liquid.parse(source);
  } catch (error) {
    throw new TemplateError(error instanceof Error ? error.message : String(error));
  }
  checkVariables(templates, paramsSchema);
  return (ctx) => {
    const scope: SummaryContext = { agent: ctx.agent, operation: ctx.operation, params: ctx.params };
    const rendered: unknown = liquid.renderSync(templates, scope, { templateLimit: TEMPLATE_LIMIT });
    return String(rendered).trim();
  };
}
