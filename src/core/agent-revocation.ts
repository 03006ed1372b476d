import type { AgentRecord } from './model.js';

/** Who revokes an agent, as the audit row records it: the CLI's operator, or a person and the way they came. */
export interface Revoker {
  actor: string;
  via?: string;
}

/** The CLI and admin socket: whoever reaches them is the operator. */
export const OPERATOR: Revoker = { actor: 'operator' };

export type RevokeRight = { can: true } | { can: false; why: string };

/**
 * Whether a person (not the operator) may revoke this agent. Revoking is an operator action; a
 * person may do it when they approve every operation the agent may propose and do not own it: they
 * could already refuse everything the agent asks for, so the kill switch gives them no power they lack.
 */
export function agentRevokeRight(
  person: string,
  agent: Pick<AgentRecord, 'owners' | 'operations'>,
  operations: readonly { name: string; approval: { approvers: readonly string[] } }[],
): RevokeRight {
  if (agent.owners.includes(person)) return { can: false, why: 'You own this agent; an operator revokes it.' };
  const byName = new Map(operations.map((operation) => [operation.name, operation]));
  const names = agent.operations ?? operations.map((operation) => operation.name);
  const approves = names.length > 0 && names.every((name) => byName.get(name)?.approval.approvers.includes(person) === true);
  return approves ? { can: true } : { can: false, why: 'Operators only: you do not approve every operation it may propose.' };
}
