/** How operator answers read on a terminal: the shared pieces of the commands' `print`. */

export type Row = Record<string, unknown>;

export function formatCell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** Aligned columns under upper-case headings; `(none)` for no rows. */
export function table(rows: readonly Row[], columns: readonly string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((row) => columns.map((column) => formatCell(row[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((cell) => (cell[i] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

export const lines = (...parts: Array<string | false | null | undefined>): string => parts.filter((part) => typeof part === 'string').join('\n');
