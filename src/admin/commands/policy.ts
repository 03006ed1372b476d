import * as z from 'zod';
import { TwokeyError } from '../../core/errors.js';
import { describeBound, grantState } from '../../core/grants.js';
import type { AgentRecord } from '../../core/model.js';
import { defineCommand } from '../command.js';
import type { AdminServices } from '../ports.js';
import { table } from '../print.js';

/** Policy rules (tried without writing) and the grants people gave. */

const required = (field: string) => z.string(`missing ${field}`).min(1, `missing ${field}`);

/** `--params '{"amount_cents": 1500}'`: the JSON text, read as an object. */
const paramsJson = z.string('missing params').transform((text, context): Record<string, unknown> => {
  let params: unknown;
  try {
    params = JSON.parse(text);
  } catch {
    context.addIssue({ code: 'custom', message: '--params must be JSON, such as \'{"amount_cents": 1500}\'' });
    return z.NEVER;
  }
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    context.addIssue({ code: 'custom', message: '--params must be a JSON object' });
    return z.NEVER;
  }
  return params as Record<string, unknown>;
});

/** An agent not created yet still has a name to test with; it has no recent proposals. */
const unsavedAgent = (name: string): AgentRecord => ({
  id: '',
  name,
  keyHash: '',
  keyPrefix: '',
  callbackSecret: '',
  owners: [],
  operations: null,
  createdAt: new Date(0),
  revokedAt: null,
});

/**
 * The operation's approver rule for one would-be approver (`--approver`, `--groups`): whether it lets
 * them approve such a proposal, and the reason shown when it does not. Null when there is no rule.
 */
async function approverRuleCheck(
  services: AdminServices,
  operation: NonNullable<ReturnType<AdminServices['operation']>>,
  agent: AgentRecord,
  input: { params: Record<string, unknown>; approver?: string | undefined; groups?: string[] | undefined },
) {
  const rule = operation.approval.approverRule;
  if (!rule) return null;
  if (!input.approver) return { when: rule.source, result: 'not evaluated: give --approver (and --groups) to test it' };
  const { approverRuleAllows, approverRuleInputOf } = await import('../../policy/approver-rule.js');
  const groups = input.groups ?? [];
  const verdict = approverRuleAllows(
    rule,
    approverRuleInputOf({ approver: { identity: input.approver, groups }, agent, operation: operation.name, params: input.params }, (identity) =>
      services.people.nameOf(identity),
    ),
  );
  const result = verdict.allowed ? 'allows' : verdict.error ? `refuses (error: ${verdict.error}): ${verdict.reason}` : `refuses: ${verdict.reason}`;
  return { when: rule.source, approver: input.approver, groups, result };
}

/** Which rule would decide a proposal, and why. Reads only: nothing is written. */
export const policyTest = defineCommand({
  name: 'policy.test',
  input: z.strictObject({
    operation: required('operation'),
    params: paramsJson,
    agent: required('agent'),
    /** Who would approve: tests the operation's approver rule for them. */
    approver: z.string().min(1).optional(),
    groups: z.array(z.string()).optional(),
  }),
  output: z.object({
    operation: z.string(),
    agent: z.string(),
    rules: z.number(),
    trace: z.array(z.object({ rule: z.string(), when: z.string(), result: z.string() })),
    decision: z.enum(['approve', 'deny', 'require']),
    decidedBy: z.string().nullable(),
    reason: z.string().nullable(),
    quorum: z.number().optional(),
    approvers: z.array(z.string()).optional(),
    /** The approvals asked for need a passkey: the operation says so, or the rule that matched does. */
    stepUp: z.literal('passkey').optional(),
    approverRule: z.object({ when: z.string(), approver: z.string().optional(), groups: z.array(z.string()).optional(), result: z.string() }).nullable(),
  }),
  async run(services, input) {
    const operation = services.operation(input.operation);
    if (!operation) throw new TwokeyError('unknown_operation', `unknown operation "${input.operation}"`);
    const problems = operation.validateParams(input.params);
    if (problems.length > 0) throw new TwokeyError('invalid_params', `params do not match the schema of "${input.operation}"`, problems);
    // The rule engine (CEL) and the policy explanation load only where a command runs, never in the CLI that only prints.
    const [{ policyVerdict }, { explainVerdict }] = await Promise.all([import('../../core/automatic-decisions.js'), import('../../policy/explain.js')]);
    const agent = (await services.store.findAgentByName(input.agent)) ?? unsavedAgent(input.agent);
    const now = services.clock();
    const verdict = await services.store.transaction((tx) => policyVerdict(tx, { agent, operation, params: input.params, proposalId: '', now }));
    const explained = explainVerdict(verdict, operation.name, operation.approval);
    const stepUp =
      explained.decision === 'require' && (operation.stepUp === 'passkey' || (explained.kind === 'require' && explained.changes.stepUp === 'passkey'));
    const needs =
      explained.decision === 'require' ? { quorum: explained.quorum, approvers: explained.approvers, ...(stepUp ? { stepUp: 'passkey' as const } : {}) } : {};
    return {
      operation: operation.name,
      agent: input.agent,
      rules: operation.policy?.length ?? 0,
      trace: explained.trace,
      decision: explained.decision,
      decidedBy: explained.decidedBy,
      reason: explained.reason,
      ...needs,
      approverRule: await approverRuleCheck(services, operation, agent, input),
    };
  },
  print: (tested) =>
    [
      ...tested.trace.map((step) => `rule ${step.rule}: ${step.when} → ${step.result}`),
      `decision: ${tested.decision}${tested.decidedBy ? ` by ${tested.decidedBy}` : ''}${tested.reason ? ` (${tested.reason})` : ''}` +
        (tested.decision === 'require' ? `; needs ${String(tested.quorum)} of ${tested.approvers?.length ? tested.approvers.join(',') : '-'}` : '') +
        (tested.stepUp === 'passkey' ? ', each approving with a passkey' : ''),
      ...(tested.approverRule
        ? [
            `approver rule: ${tested.approverRule.when} → ${tested.approverRule.approver ? `${tested.approverRule.approver}: ` : ''}${tested.approverRule.result}`,
          ]
        : []),
    ].join('\n'),
});

export const grantsList = defineCommand({
  name: 'grants.list',
  input: z.strictObject({ all: z.boolean().optional() }),
  output: z.array(
    z.object({
      id: z.string(),
      state: z.string(),
      operation: z.string(),
      agent: z.string(),
      grantedBy: z.array(z.string()),
      quorum: z.number(),
      uses: z.string(),
      bounds: z.array(z.string()),
      expiresAt: z.string(),
      revokedBy: z.string().nullable(),
    }),
  ),
  async run(services, input) {
    const now = services.clock();
    const agents = new Map((await services.agents.list()).map((agent) => [agent.id, agent.name]));
    const entries = await services.grants.list(input.all === true ? {} : { activeAt: now });
    return entries.map(({ grant, approvals }) => ({
      id: grant.id,
      state: grantState(grant, now),
      operation: grant.operation,
      agent: agents.get(grant.agentId) ?? grant.agentId,
      grantedBy: approvals.map((a) => a.approver),
      quorum: grant.quorum,
      uses: grant.maxUses === null ? `${grant.uses}` : `${grant.uses}/${grant.maxUses}`,
      bounds: grant.bounds.map(describeBound),
      expiresAt: grant.expiresAt.toISOString(),
      revokedBy: grant.revokedBy,
    }));
  },
  print: (grants) => table(grants, ['id', 'state', 'operation', 'agent', 'grantedBy', 'quorum', 'uses', 'bounds', 'expiresAt']),
});

export const grantsRevoke = defineCommand({
  name: 'grants.revoke',
  input: z.strictObject({
    id: required('id'),
    /** Who revokes, as the audit log records it. */
    as: z.string().optional(),
  }),
  output: z.object({ id: z.string(), revokedAt: z.string().nullable(), uses: z.number() }),
  async run(services, input) {
    const grant = await services.grants.revoke(input.id, input.as || 'operator:cli');
    return { id: grant.id, revokedAt: grant.revokedAt?.toISOString() ?? null, uses: grant.uses };
  },
  print: (revoked) => `grant ${revoked.id} revoked at ${String(revoked.revokedAt)} after ${revoked.uses} use(s)`,
});
