import { getTableColumns, getTableName, sql, type SQL } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';

/**
 * Rows inserted as a CTE of a larger statement (a transaction's buffered statement in
 * src/db/store.ts, an `open` execute's audit row): one parameter, the rows as JSON keyed by column
 * name, so the text never changes (one named statement) and nothing is rendered per column. Values
 * go through their column's mapping but JSON ones, which stay JSON; JSON null becomes SQL null in
 * every column, as drizzle's own insert stores a null. Unlike drizzle's insert, a column the record
 * leaves out is null too, never its default: callers pass whole records (a proposal, a token).
 */
export function rowsInsertCte<T extends PgTable>(table: T, name: string, records: ReadonlyArray<Partial<T['$inferInsert']>>, onlyIf?: SQL): SQL {
  const tableName = sql.identifier(getTableName(table));
  const condition = onlyIf ? sql` where ${onlyIf}` : sql``;
  return sql`${sql.raw(name)} as (insert into ${tableName} select * from jsonb_populate_recordset(null::${tableName}, ${rowsJson(table, records)}::jsonb)${condition} returning 1)`;
}

/** Each table's columns as `rowsJson` writes them: key in the record, name in the row, how its value is written. */
const columnsOf = new WeakMap<PgTable, Array<{ key: string; name: string; toRow: (value: unknown) => unknown }>>();

function rowColumns(table: PgTable) {
  let columns = columnsOf.get(table);
  if (!columns) {
    columns = Object.entries(getTableColumns(table)).map(([key, column]) => ({
      key,
      name: column.name,
      // JSON stays JSON (the row is JSON already); every other value goes through its column's mapping.
      toRow: column.getSQLType() === 'jsonb' ? (value: unknown) => value : (value: unknown) => column.mapToDriverValue(value),
    }));
    columnsOf.set(table, columns);
  }
  return columns;
}

/** The one parameter of `rowsInsertCte`: the records as JSON rows keyed by column name. */
export function rowsJson<T extends PgTable>(table: T, records: ReadonlyArray<Partial<T['$inferInsert']>>): string {
  const columns = rowColumns(table);
  const rows = records.map((record) => {
    const row: Record<string, unknown> = {};
    for (const { key, name, toRow } of columns) {
      const value = (record as Record<string, unknown>)[key];
      row[name] = value === null || value === undefined ? null : toRow(value);
    }
    return row;
  });
  return JSON.stringify(rows);
}
