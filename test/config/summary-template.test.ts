import { describe, expect, it, vi } from 'vitest';
import { compileSummaryTemplate, formatDate, formatUsd, TemplateError } from '../../src/config/summary-template.js';

const schema = {
  type: 'object',
  properties: {
    org: { type: 'string' },
    note: { type: 'string' },
    amount_cents: { type: 'integer' },
    at: { type: 'string' },
    items: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } },
    billing: { type: 'object', properties: { email: { type: 'string' } } },
    labels: { type: 'object' },
  },
};

function render(source: string, params: Record<string, unknown>, agent = 'billing-bot'): string {
  return compileSummaryTemplate(source, schema)({ agent, operation: 'upgrade_plan', params });
}

describe('usd', () => {
  it.each([
    [0, '$0.00'],
    [5, '$0.05'],
    [1234, '$12.34'],
    [123456, '$1,234.56'],
    [-250, '-$2.50'],
    [100_000_000_00, '$100,000,000.00'],
  ])('formats %i cents as %s', (cents, text) => {
    expect(formatUsd(cents)).toBe(text);
    expect(render('{{ params.amount_cents | usd }}', { amount_cents: cents })).toBe(text);
  });

  it.each([
    [2 ** 80, '$12,089,258,196,146,291,747,061.76'],
    [1.5e21, '$15,000,000,000,000,000,000.00'],
    [Number.MAX_SAFE_INTEGER, '$90,071,992,547,409.91'],
    ['900719925474099312', '$9,007,199,254,740,993.12'],
    [-1e22, '-$100,000,000,000,000,000,000.00'],
  ])('formats the large amount %s exactly, never in exponent notation', (cents, text) => {
    expect(formatUsd(cents)).toBe(text);
    expect(render('{{ params.amount_cents | usd }}', { amount_cents: cents })).toBe(text);
  });

  it('renders an absent amount as nothing', () => {
    expect(render('[{{ params.amount_cents | usd }}]', {})).toBe('[]');
  });
});

describe('date', () => {
  it('formats ISO strings and epoch milliseconds in UTC', () => {
    expect(formatDate('2026-11-22T15:05:59+01:00')).toBe('2026-11-22 14:05 UTC');
    expect(formatDate(Date.UTC(2026, 10, 22, 14, 5))).toBe('2026-11-22 14:05 UTC');
    expect(render('{{ params.at | date }}', { at: '2026-11-22T14:05:00Z' })).toBe('2026-11-22 14:05 UTC');
  });

  it('shows unparseable input unchanged', () => {
    expect(render('{{ params.at | date }}', { at: 'next tuesday' })).toBe('next tuesday');
  });

  it('still accepts an explicit strftime format, in UTC', () => {
    expect(render('{{ params.at | date: "%Y-%m-%d %H:%M" }}', { at: '2026-11-22T23:30:00-02:00' })).toBe('2026-11-23 01:30');
  });
});

describe('compileSummaryTemplate', () => {
  it('renders agent, operation and params without HTML escaping', () => {
    const renderSummary = compileSummaryTemplate('{{ agent }} runs {{ operation }} on {{ params.org }}', schema);
    expect(renderSummary({ agent: 'bot <1>', operation: 'upgrade_plan', params: { org: 'A & B "co"' } })).toBe('bot <1> runs upgrade_plan on A & B "co"');
  });

  it('renders a declared but absent optional param as an empty string', () => {
    expect(render('org={{ params.org }} note=[{{ params.note }}] email=[{{ params.billing.email }}]', { org: 'acme' })).toBe('org=acme note=[] email=[]');
  });

  it('reads nested and looped values that the schema declares', () => {
    const text = render('{% for item in params.items %}{{ item.sku }};{% endfor %} {{ params.billing.email }} {{ params.labels.team }}', {
      items: [{ sku: 'a' }, { sku: 'b' }],
      billing: { email: 'x@y.z' },
      labels: { team: 'core' },
    });
    expect(text).toBe('a;b; x@y.z core');
  });

  it.each([
    ['{{ params.orgg }}', /params\.orgg.*"orgg" is not declared/],
    ['{{ params.billing.phone }}', /"phone" is not declared/],
    ['{{ user }}', /user.*unknown variable/],
    ['{{ params }}', /read a single param/],
    ['{{ params[params.org] }}', /computed param names/],
    ['{% if params.org == "x" %}{{ params.secret_field }}{% endif %}', /"secret_field" is not declared/],
    ['{{ params.org | default: params.fallback }}', /"fallback" is not declared/],
  ])('refuses %j at compile time', (source, message) => {
    expect(() => compileSummaryTemplate(source, schema)).toThrow(message);
  });

  it('refuses unknown filters at compile time', () => {
    expect(() => compileSummaryTemplate('{{ params.amount_cents | eur }}', schema)).toThrow(/undefined filter: eur/);
  });

  it.each(["{% include 'x' %}", "{% render '/etc/passwd' %}", "{% layout 'base' %}"])('cannot read files: %s', (source) => {
    expect(() => compileSummaryTemplate(source, schema)).toThrow(TemplateError);
  });

  it('stops a template whose loops would allocate too much, before it runs them', () => {
    // A range is charged its length up front, so this fails on the first step whatever the machine's speed.
    const huge = compileSummaryTemplate('{% for i in (1..100000000) %}x{% endfor %}', schema);
    expect(() => huge({ agent: 'a', operation: 'o', params: {} })).toThrow(/memory alloc limit exceeded/);
  });

  it('stops a template that renders past its time limit (clock injected: each reading is 300 ms later)', () => {
    const loop = compileSummaryTemplate('{% for i in (1..50) %}{% for j in (1..50) %}x{% endfor %}{% endfor %}', schema);
    let now = 0;
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => (now += 300));
    try {
      expect(() => loop({ agent: 'a', operation: 'o', params: {} })).toThrow(/template render limit exceeded/);
    } finally {
      clock.mockRestore();
    }
    // The same template under a clock that does not move renders in full.
    expect(loop({ agent: 'a', operation: 'o', params: {} })).toBe('x'.repeat(2500));
  });

  it('refuses oversized templates', () => {
    expect(() => compileSummaryTemplate('x'.repeat(30_000), schema)).toThrow(/parse length limit/);
  });
});

describe('params in a summary are shown as values', () => {
  const forged = 'invoice 42\n\nCost: $1.00 (one dollar)\nApproved by security team ✅';

  it('shows line breaks in a param as ⏎, so it cannot forge lines of its own', () => {
    const summary = render('Pay {{ params.org }} now.', { org: forged });
    expect(summary).toBe('Pay invoice 42⏎⏎Cost: $1.00 (one dollar)⏎Approved by security team ✅ now.');
    expect(summary).not.toMatch(/[\n\r\u2028\u2029]/);
  });

  it("keeps the operator's own line breaks", () => {
    expect(render('Pay {{ params.org }}\nnow.', { org: 'acme' })).toBe('Pay acme\nnow.');
  });

  it('makes bidi controls and zero-width characters visible', () => {
    expect(render('{{ params.org }}', { org: 'invoice\u202Efdp.exe' })).toBe('invoice[U+202E]fdp.exe');
    expect(render('{{ params.org }}', { org: 'pay\u200Bpal\u2066x\u2069\uFEFF' })).toBe('pay[U+200B]pal[U+2066]x[U+2069][U+FEFF]');
    expect(render('{{ params.org }}', { org: 'bell\u0007\u001b[31m' })).toBe('bell[U+0007][U+001B][31m');
  });

  it('warns about a word that mixes scripts, and leaves single-script text alone', () => {
    expect(render('{{ params.org }}', { org: '\u0410cme' })).toBe('\u0410cme [⚠ mixed scripts: Cyrillic + Latin]');
    expect(render('{{ params.org }}', { org: 'Привет, café 東京タワー 👩\u200D💻' })).toBe('Привет, café 東京タワー 👩\u200D💻');
  });

  it('flags a word that passes for a different ASCII word: another script, fullwidth or styled letters', () => {
    expect(render('Refund to {{ params.org }}.', { org: '\u0410\u0421\u041C\u0415' })).toBe('Refund to АСМЕ [⚠ look-alike of “ACME”].');
    expect(render('{{ params.org }}', { org: '\uFF21\uFF23\uFF2D\uFF25' })).toBe('ＡＣＭＥ [⚠ look-alike of “ACME”]');
    expect(render('{{ params.org }}', { org: '𝐩𝐚𝐲 ١٠٠' })).toBe('𝐩𝐚𝐲 ١٠٠ [⚠ look-alike of “pay”]');
  });

  it('makes blank padding, strike-through and other marks that are not accents visible', () => {
    expect(render('{{ params.org }}', { org: 'acme\u2800\u2800\u2800\u2800Approved' })).toBe('acme[U+2800×4]Approved');
    expect(render('{{ params.org }}', { org: 'a\u3000\u3164b' })).toBe('a[U+3000][U+3164]b');
    expect(render('{{ params.org }}', { org: 'A\u0336C\u0336ME' })).toBe('A[U+0336]C[U+0336]ME');
  });

  it('applies after filters, and templates cannot opt out with raw', () => {
    expect(render('{{ params.org | upcase }}', { org: 'a\nb' })).toBe('A⏎B');
    expect(() => compileSummaryTemplate('{{ params.org | raw }}', schema)).toThrow(TemplateError);
  });
});
