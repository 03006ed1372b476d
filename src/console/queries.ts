import { and, desc, eq, exists, gte, inArray, lt, max, or, sql } from 'drizzle-orm';
import type { ApprovalRecord, ProposalRecord, ProposalStatus } from '../core/model.js';
import type { Db } from '../db/database.js';
import { approvals, auditEvents, proposals } from '../db/schema.js';
import { toProposal } from '../db/store.js';

/** Read-only queries the console needs beyond the core's store: history filters, batch reads. */

export interface HistoryFilter {
  status?: ProposalStatus;
  operation?: string;
  agentId?: string;
  /** Proposals this person approved or decided. */
  approver?: string;
  /** Created at or after. */
  from?: Date;
  /** Created before. */
  to?: Date;
  limit: number;
}


export function createConsoleQueries(db: Db) {
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

  /** Approvals of many proposals in one query (a list page shows "n of m" on every row). */
  async function approvalsOf(ids: readonly string[]): Promise<Map<string, ApprovalRecord[]>> {
    const byProposal = new Map<string, ApprovalRecord[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return byProposal;
    const rows = await db.select().from(approvals).where(inArray(approvals.proposalId, [...ids])).orderBy(approvals.at);
    for (const row of rows) byProposal.get(row.proposalId)?.push(row);
    return byProposal;
  }

  /** The latest audit event that names each agent: its last proposal, decision, or key change. */
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

  /** Proposals per agent and status, for the agents page. */
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

export type ConsoleQueries = ReturnType<typeof createConsoleQueries>;
