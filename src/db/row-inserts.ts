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
  const columns = Object.entries(getTableColumns(table));
  const rows = records.map((record) => {
    const row: Record<string, unknown> = {};
    for (const [key, column] of columns) {
      const value = (record as Record<string, unknown>)[key];
      row[column.name] = value === null || value === undefined ? null : column.getSQLType() === 'jsonb' ? value : column.mapToDriverValue(value);
    }
    return row;
  });
  const tableName = sql.identifier(getTableName(table));
  const condition = onlyIf ? sql` where ${onlyIf}` : sql``;
  return sql`${sql.raw(name)} as (insert into ${tableName} select * from jsonb_populate_recordset(null::${tableName}, ${JSON.stringify(rows)}::jsonb)${condition} returning 1)`;
}
