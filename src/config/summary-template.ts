import { Liquid } from 'liquidjs';
import type { FS, FilterImplOptions, Template } from 'liquidjs';
import type { SummaryContext } from '../core/model.js';
import { displaySafe } from './display-text.js';

export type JSONSchema = Record<string, unknown>;

/** Everything a summary template can read (the core's `SummaryContext`): the proposal, nothing of the server. */
export type { SummaryContext } from '../core/model.js';

export type RenderSummary = (ctx: SummaryContext) => string;

/** What a `result` template reads: the proposal, and what its executor answered. */
export interface ResultContext extends SummaryContext {
  result: unknown;
}

export type RenderResult = (ctx: ResultContext) => string;

/** A template that cannot be compiled; the config loader prefixes the field path. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

// Templates are a line or a paragraph; these bounds only stop a hostile or broken config
// (or a huge param) from stalling the proposal path.
const PARSE_LIMIT_CHARS = 20_000;
// Wall-clock time, so it also counts time the process waits for a CPU: 100 ms failed ordinary
// proposals with 500 on a loaded machine (load average 30 on 2 cores), where a render takes < 1 ms.
const RENDER_LIMIT_MS = 1_000;
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

/** Liquid's own way of printing a value (arrays joined, nil as nothing), before it is made safe. */
function printed(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) return value.map(printed).join('');
  return typeof value === 'string' ? value : String(value);
}

const liquid = new Liquid({
  // Every {{ output }} is a value an agent may have chosen: it is shown as one value (no line breaks,
  // no bidi or invisible characters, a warning on mixed scripts), in every channel. The operator's
  // own template text around it is left as written.
  outputEscape: (value: unknown) => displaySafe(printed(value)),
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
// `raw` would switch off the output escaping above.
delete liquid.filters['raw'];

/**
 * Cents as dollars, exactly for any integer: BigInt arithmetic, so 1.5e21 cents prints every digit
 * rather than `$1.5e+19.xx`. A fractional number of cents is rounded to the cent first.
 */
export function formatUsd(cents: unknown): string {
  if (cents === undefined || cents === null || cents === '') return '';
  let amount: bigint;
  if (typeof cents === 'bigint') amount = cents;
  else if (typeof cents === 'string' && /^\s*-?\d+\s*$/.test(cents)) amount = BigInt(cents.trim());
  else {
    const n = typeof cents === 'number' ? cents : Number(cents);
    if (!Number.isFinite(n)) return typeof cents === 'string' ? cents : '';
    amount = BigInt(Math.round(n));
  }
  const abs = amount < 0n ? -amount : amount;
  const dollars = (abs / 100n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const rest = (abs % 100n).toString().padStart(2, '0');
  return `${amount < 0n ? '-' : ''}$${dollars}.${rest}`;
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

// The first render of the process pays for compiling liquid's and the escaper's code paths; on a
// loaded machine that alone can pass RENDER_LIMIT_MS and fail an agent's first proposal.
try {
  liquid.parseAndRenderSync('{{ value | usd }} {{ value | upcase }}', { value: 'warm\n\u0410a' });
} catch {
  // Only a warm-up: on a starved machine it may itself pass the limit, which must not stop start.
}

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
function checkVariables(templates: Template[], paramsSchema: JSONSchema, extraRoots: readonly string[] = []): void {
  const problems: string[] = [];
  const { globals } = liquid.analyzeSync(templates, { partials: false });
  for (const [root, uses] of Object.entries(globals)) {
    for (const variable of uses) {
      const where = `${variable.toString()} (line ${variable.location.row})`;
      if (root === 'agent' || root === 'operation') {
        if (variable.segments.length > 1) problems.push(`${where}: ${root} is a string; use {{ ${root} }}`);
        continue;
      }
      // An executor's answer has no declared shape: any path below it is allowed.
      if (extraRoots.includes(root)) continue;
      if (root !== 'params') {
        problems.push(`${where}: unknown variable; templates can read ${['agent', 'operation', ...extraRoots].join(', ')} and params.<name>`);
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
function parseTemplate(source: string): Template[] {
  try {
    return liquid.parse(source);
  } catch (error) {
    throw new TemplateError(error instanceof Error ? error.message : String(error));
  }
}

export function compileSummaryTemplate(source: string, paramsSchema: JSONSchema): RenderSummary {
  const templates = parseTemplate(source);
  checkVariables(templates, paramsSchema);
  return (ctx) => {
    const scope: SummaryContext = { agent: ctx.agent, operation: ctx.operation, params: ctx.params };
    const rendered: unknown = liquid.renderSync(templates, scope, { templateLimit: TEMPLATE_LIMIT });
    return String(rendered).trim();
  };
}

/**
 * Compiles an operation's `result` template: what humans in chat see of the executor's answer
 * (`{{ result.status }}`). Values are shown as values, like the summary's params.
 */
export function compileResultTemplate(source: string, paramsSchema: JSONSchema): RenderResult {
  const templates = parseTemplate(source);
  checkVariables(templates, paramsSchema, ['result']);
  return (ctx) => {
    const scope: ResultContext = { agent: ctx.agent, operation: ctx.operation, params: ctx.params, result: ctx.result };
    const rendered: unknown = liquid.renderSync(templates, scope, { templateLimit: TEMPLATE_LIMIT });
    return String(rendered).trim();
  };
}
