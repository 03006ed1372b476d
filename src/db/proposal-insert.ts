import { getTableColumns, sql, type SQL } from 'drizzle-orm';
import type { ProposalRecord } from '../core/model.js';
import { proposals } from './schema.js';

const proposalColumns = Object.entries(getTableColumns(proposals));

/**
 * A new proposal's insert as a CTE of a transaction's buffered statement (src/db/store.ts): one
 * parameter, the row as JSON keyed by column name, so the text never changes (one named statement)
 * and nothing is rendered per column. JSON null becomes SQL null in every column, as the prepared
 * insert it replaced stored it.
 */
export function proposalInsertCte(proposal: ProposalRecord, index: number): SQL {
  const row: Record<string, unknown> = {};
  for (const [key, column] of proposalColumns) {
    const value = (proposal as unknown as Record<string, unknown>)[key];
    row[column.name] = value === null || value === undefined ? null : column.getSQLType() === 'jsonb' ? value : column.mapToDriverValue(value);
  }
  const name = sql.raw(`proposal_${index}`);
  return sql`${name} as (insert into proposals select * from jsonb_populate_record(null::proposals, ${JSON.stringify(row)}::jsonb) returning 1)`;
}
