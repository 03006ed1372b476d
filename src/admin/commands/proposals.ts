import * as z from 'zod';
import { parseDuration } from '../../lib/duration.js';
import { TwokeyError } from '../../core/errors.js';
import { identities } from '../../platforms/index.js';
import type { ProposalStatus } from '../../core/model.js';
import { defineCommand } from '../command.js';
import { table } from '../print.js';

/** Proposals, decided from the CLI by a named approver, with the same rules as a chat click. */

const STATUSES = ['pending', 'approved', 'executing', 'committed', 'rejected', 'expired', 'cancelled'] as const satisfies readonly ProposalStatus[];

const id = z.string('missing id').min(1, 'missing id');

/** The approver the operator acts as: one person, never a group or a role. */
const decider = z
  .string('missing as')
  .min(1, 'missing as')
  .refine((identity) => identities.parsePersonIdentity(identity) !== null, {
    error: (issue) => `--as must name one person (${identities.PERSON_FORMS}), not "${String(issue.input)}"`,
  })
  .transform((identity) => ({ identity, via: 'cli' }));

const durationMs = z.string().transform((text, context) => {
  try {
    return parseDuration(text);
  } catch {
    context.addIssue({ code: 'custom', message: '--grant must be a duration such as 15m or 1h' });
    return z.NEVER;
  }
});

const executionAnswer = { id: z.string(), status: z.string(), result: z.unknown(), error: z.string().nullable() };

/** What a committed or failed run shows, under the command's own first line. */
const runLines = (answer: { status: string; result?: unknown; error: string | null }): string[] => [
  ...(answer.status === 'committed' ? [`result: ${JSON.stringify(answer.result)}`] : []),
  ...(answer.error ? [`execution error: ${answer.error}`] : []),
];

export const proposalsList = defineCommand({
  name: 'proposals.list',
  input: z.strictObject({ status: z.enum(STATUSES, `--status must be one of ${STATUSES.join(', ')}`).optional() }),
  output: z.array(
    z.object({
      id: z.string(),
      status: z.string(),
      operation: z.string(),
      agent: z.string(),
      summary: z.string(),
      createdAt: z.string(),
      expiresAt: z.string(),
      error: z.string().nullable(),
    }),
  ),
  async run(services, input) {
    const agents = new Map((await services.agents.list()).map((agent) => [agent.id, agent.name]));
    const proposals = await services.store.listProposals(input.status ? { status: input.status } : {});
    return proposals.map((proposal) => ({
      id: proposal.id,
      status: proposal.status,
      operation: proposal.operation,
      agent: agents.get(proposal.agentId) ?? proposal.agentId,
      summary: proposal.summary,
      createdAt: proposal.createdAt.toISOString(),
      expiresAt: proposal.expiresAt.toISOString(),
      error: proposal.error,
    }));
  },
  print: (proposals) => table(proposals, ['id', 'status', 'operation', 'agent', 'expiresAt', 'summary']),
});

export const proposalsApprove = defineCommand({
  name: 'proposals.approve',
  input: z.strictObject({
    id,
    as: decider,
    /** And a grant for the same operation and agent, for this long. */
    grant: durationMs.optional(),
    uses: z.string().regex(/^\d+$/, '--uses must be a whole number').transform(Number).optional(),
    bounded: z.boolean().optional(),
  }),
  output: z.object({
    ...executionAnswer,
    outcome: z.string(),
    approvals: z.number(),
    quorum: z.number(),
    grantId: z.string().nullable(),
  }),
  async run(services, input) {
    const granted =
      input.grant === undefined
        ? null
        : await services.grants.approveAndGrant(input.id, input.as, { durationMs: input.grant, maxUses: input.uses ?? null, bounded: input.bounded === true });
    const { outcome, proposal } = granted ?? (await services.proposals.approve(input.id, input.as));
    const approvals = await services.store.listApprovals(proposal.id);
    return {
      outcome,
      id: proposal.id,
      status: proposal.status,
      approvals: approvals.length,
      quorum: proposal.quorum,
      result: proposal.result ?? null,
      error: proposal.error,
      grantId: granted?.grant.id ?? null,
    };
  },
  print: (approved) =>
    [
      `${approved.id}: ${approved.outcome.replace('_', ' ')}; ${approved.approvals} of ${approved.quorum} approvals; status ${approved.status}`,
      ...runLines(approved),
      ...(approved.grantId ? [`grant ${approved.grantId} given (see twokey grants list)`] : []),
    ].join('\n'),
});

export const proposalsReject = defineCommand({
  name: 'proposals.reject',
  input: z.strictObject({ id, as: decider, reason: z.string().optional() }),
  output: z.object({ id: z.string(), status: z.string(), reason: z.string().nullable() }),
  async run(services, input) {
    const { proposal } = await services.proposals.reject(input.id, input.as, input.reason || undefined);
    return { id: proposal.id, status: proposal.status, reason: proposal.decisionReason };
  },
  print: (rejected) => `${rejected.id}: rejected${rejected.reason ? ` (${rejected.reason})` : ''}`,
});

/** An approver's Retry after a failed execution, as the chat button does: same rules, same idempotency key. */
export const proposalsRetry = defineCommand({
  name: 'proposals.retry',
  input: z.strictObject({ id, as: decider }),
  output: z.object(executionAnswer),
  async run(services, input) {
    try {
      await services.proposals.retry(input.id, input.as);
    } catch (error) {
      // A failed run is an answer, not a crash: the proposal is back to `approved` with the error.
      if (!(error instanceof TwokeyError && error.code === 'execution_failed')) throw error;
    }
    const proposal = await services.proposals.get(input.id);
    return { id: proposal.id, status: proposal.status, result: proposal.result ?? null, error: proposal.error };
  },
  print: (retried) => [`${retried.id}: status ${retried.status}`, ...runLines(retried)].join('\n'),
  // Still not committed means the run failed again: say so to scripts too.
  failed: (retried) => retried.status !== 'committed',
});
