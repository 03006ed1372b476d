import { policyVerdict } from '../core/automatic-decisions.js';
import { TwokeyError } from '../core/errors.js';
import { describeBound, grantState } from '../core/grants.js';
import type { AgentRecord } from '../core/model.js';
import { approverRuleAllows } from '../policy/approver-rule.js';
import { policyDecider } from '../policy/rules.js';
import type { Services } from '../runtime/services.js';

/** Operator operations about policies and grants (CLI and admin socket), as plain JSON. */

function requireString(args: Record<string, unknown>, name: string): string {
  const value = args[name];
  if (typeof value !== 'string' || value.length === 0) throw new TwokeyError('invalid_request', `missing ${name}`);
  return value;
}

function parseParams(text: string): Record<string, unknown> {
  let params: unknown;
  try {
    params = JSON.parse(text);
  } catch {
    throw new TwokeyError('invalid_request', '--params must be JSON, such as \'{"amount_cents": 1500}\'');
  }
  if (typeof params !== 'object' || params === null || Array.isArray(params)) throw new TwokeyError('invalid_request', '--params must be a JSON object');
  return params as Record<string, unknown>;
}

/**
 * The operation's approver rule for one would-be approver (`--approver`, `--groups`): whether it lets
 * them approve such a proposal, and the reason shown when it does not. Null when there is no rule.
 */
function approverRuleCheck(
  services: Services,
  operation: NonNullable<ReturnType<Services['operation']>>,
  agent: AgentRecord,
  params: Record<string, unknown>,
  args: Record<string, unknown>,
) {
  const rule = operation.approval.approverRule;
  if (!rule) return null;
  const identity = typeof args.approver === 'string' && args.approver ? args.approver : null;
  if (!identity) return { when: rule.source, result: 'not evaluated: give --approver (and --groups) to test it' };
  const groups = Array.isArray(args.groups) ? args.groups.filter((group): group is string => typeof group === 'string') : [];
  const asPerson = (id: string): string => services.people.nameOf(id) ?? id;
  const verdict = approverRuleAllows(rule, {
    approver: { identity, person: asPerson(identity), groups },
    agent: agent.name,
    owners: agent.owners.map(asPerson),
    operation: operation.name,
    params,
  });
  const result = verdict.allowed ? 'allows' : verdict.error ? `refuses (error: ${verdict.error}): ${verdict.reason}` : `refuses: ${verdict.reason}`;
  return { when: rule.source, approver: identity, groups, result };
}

export const policyOperations = {
  /** Which rule would decide a proposal, and why. Reads only: nothing is written. */
  async 'policy.test'(services: Services, args: Record<string, unknown>) {
    const name = requireString(args, 'operation');
    const operation = services.operation(name);
    if (!operation) throw new TwokeyError('unknown_operation', `unknown operation "${name}"`);
    const params = parseParams(requireString(args, 'params'));
    const problems = operation.validateParams(params);
    if (problems.length > 0) throw new TwokeyError('invalid_params', `params do not match the schema of "${name}"`, problems);
    const agentName = requireString(args, 'agent');
    // An agent not created yet still has a name to test with; it has no recent proposals.
    const agent: AgentRecord = (await services.store.findAgentByName(agentName)) ?? {
      id: '',
      name: agentName,
      keyHash: '',
      keyPrefix: '',
      callbackSecret: '',
      owners: [],
      operations: null,
      createdAt: new Date(0),
      revokedAt: null,
    };
    const now = services.clock();
    const verdict = await services.store.transaction((tx) => policyVerdict(tx, { agent, operation, params, proposalId: '', now }));
    const trace = verdict.trace.map((step) => ({
      rule: `#${step.index}`,
      when: step.when,
      result: step.verdict.kind === 'undecided' ? `error: ${step.verdict.error}` : step.verdict.kind === 'match' ? 'true' : 'false',
    }));
    const base = {
      operation: name,
      agent: agentName,
      rules: operation.policy?.length ?? 0,
      trace,
      approverRule: approverRuleCheck(services, operation, agent, params, args),
    };
    switch (verdict.kind) {
      case 'none':
        return {
          ...base,
          decision: 'require',
          decidedBy: null,
          reason: "no rule matched: the operation's approval applies",
          quorum: operation.approval.quorum,
          approvers: operation.approval.approvers,
        };
      case 'fallback':
        return {
          ...base,
          decision: 'require',
          decidedBy: null,
          reason: `rule #${verdict.rule.index} could not be evaluated (${verdict.error}): the operation's approval applies`,
          quorum: operation.approval.quorum,
          approvers: operation.approval.approvers,
        };
      case 'require':
        return {
          ...base,
          decision: 'require',
          decidedBy: policyDecider(name, verdict.rule),
          reason: verdict.reason,
          quorum: verdict.quorum ?? operation.approval.quorum,
          approvers: verdict.approvers ?? operation.approval.approvers,
        };
      case 'approve':
      case 'deny':
        return { ...base, decision: verdict.kind, decidedBy: policyDecider(name, verdict.rule), reason: verdict.reason };
    }
  },
  async 'grants.list'(services: Services, args: Record<string, unknown>) {
    const now = services.clock();
    const agents = new Map((await services.agents.list()).map((agent) => [agent.id, agent.name]));
    const entries = await services.grants.list({ ...(args.all === true ? {} : { activeAt: now }) });
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
  async 'grants.revoke'(services: Services, args: Record<string, unknown>) {
    const grant = await services.grants.revoke(requireString(args, 'id'), typeof args.as === 'string' && args.as ? args.as : 'operator:cli');
    return { id: grant.id, revokedAt: grant.revokedAt?.toISOString() ?? null, uses: grant.uses };
  },
} satisfies Record<string, (services: Services, args: Record<string, unknown>) => Promise<unknown>>;
