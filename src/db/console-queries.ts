import { and, desc, eq, exists, gte, inArray, lt, max, or, sql } from 'drizzle-orm';
import type { ConsoleQueries, HistoryFilter } from '../console/ports.js';
import type { ApprovalRecord, ProposalRecord } from '../core/model.js';
import type { Db } from './database.js';
import { approvals, auditEvents, proposals } from './schema.js';
import { toProposal } from './store.js';

/** The web console's read-only SQL beyond the core's store (src/console/ports.ts says what each returns). */
export function createConsoleQueries(db: Db): ConsoleQueries {
  async function history(filter: HistoryFilter): Promise<ProposalRecord[]> {
    const approver = filter.approver;
    const rows = await db
      .select()
      .from(proposals)
      .where(
        and(
          filter.status ? eq(proposals.status, filter.status) : undefined,
          filter.operation ? eq(proposals.operation, filter.operation) : undefined,
          filter.agentId ? eq(proposals.agentId, filter.agentId) : undefined,
          filter.from ? gte(proposals.createdAt, filter.from) : undefined,
          filter.to ? lt(proposals.createdAt, filter.to) : undefined,
          approver
            ? or(
                eq(proposals.decidedBy, approver),
                exists(
                  db
                    .select({ one: sql`1` })
                    .from(approvals)
                    .where(and(eq(approvals.proposalId, proposals.id), eq(approvals.approver, approver))),
                ),
              )
            : undefined,
        ),
      )
      .orderBy(desc(proposals.createdAt))
      .limit(filter.limit);
    return rows.map(toProposal);
  }

  async function approvalsOf(ids: readonly string[]): Promise<Map<string, ApprovalRecord[]>> {
    const byProposal = new Map<string, ApprovalRecord[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return byProposal;
    const rows = await db
      .select()
      .from(approvals)
      .where(inArray(approvals.proposalId, [...ids]))
      .orderBy(approvals.at);
    for (const row of rows) byProposal.get(row.proposalId)?.push(row);
    return byProposal;
  }

  async function lastActivityByAgent(): Promise<Map<string, Date>> {
    const rows = await db
      .select({ agentId: auditEvents.agentId, at: max(auditEvents.at) })
      .from(auditEvents)
      .where(sql`${auditEvents.agentId} is not null`)
      .groupBy(auditEvents.agentId);
    const activity = new Map<string, Date>();
    for (const row of rows) if (row.agentId && row.at) activity.set(row.agentId, new Date(row.at));
    return activity;
  }

  async function proposalCountsByAgent(): Promise<Map<string, { total: number; pending: number }>> {
    const rows = await db
      .select({ agentId: proposals.agentId, status: proposals.status, count: sql<number>`count(*)::int` })
      .from(proposals)
      .groupBy(proposals.agentId, proposals.status);
    const counts = new Map<string, { total: number; pending: number }>();
    for (const row of rows) {
      const entry = counts.get(row.agentId) ?? { total: 0, pending: 0 };
      entry.total += Number(row.count);
      if (row.status === 'pending') entry.pending += Number(row.count);
      counts.set(row.agentId, entry);
    }
    return counts;
  }

  return { history, approvalsOf, lastActivityByAgent, proposalCountsByAgent };
}
